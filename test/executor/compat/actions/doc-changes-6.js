// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: docs/lit-actions/migration/changes.mdx (JavaScript code block 6)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
// Any chain — just supply your own RPC URL
const provider = new ethers.providers.JsonRpcProvider("https://your-rpc-url");
