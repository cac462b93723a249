// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: lit-actions/tests/it.rs (test fn webcrypto, its code string (indoc! removes the common indentation))
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
async function main() {
    const data = new TextEncoder().encode("Hello, World!")
    const hashed = await crypto.subtle.digest("SHA-256", data)
    Lit.Actions.setResponse({response: hashed.byteLength.toString()})
}
