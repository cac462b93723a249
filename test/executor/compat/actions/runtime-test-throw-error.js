// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: lit-actions/tests/it.rs (test fn throw_error, its code string (indoc! removes the common indentation))
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
async function main() {
throw new Error("boom")
}
