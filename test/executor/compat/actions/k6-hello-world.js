// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: k6/LitActionCode/hello-world.js (whole file)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
async function main() {
  return "Hello World!";
}
