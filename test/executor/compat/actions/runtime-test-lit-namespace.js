// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: lit-actions/tests/it.rs (test fn lit_namespace, its code string (indoc! removes the common indentation))
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
async function main() {
console.log(
    Object.keys(Lit.Actions).length > 0,
    Object.keys(Lit.Headers).length === 0,

    Lit.Actions === LitActions,
    Lit.Actions === globalThis.LitActions,

    Lit.Headers === LitHeaders,
    Lit.Headers === globalThis.LitHeaders,

    Lit === globalThis.Lit,
)
}
