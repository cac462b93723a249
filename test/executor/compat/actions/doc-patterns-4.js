// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: docs/lit-actions/patterns.mdx (JavaScript code block 4)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
async function main({ pkpAddress }) {
  const ALLOWED_PKP = "0xAbc123..."; // your PKP's wallet address

  if (pkpAddress.toLowerCase() !== ALLOWED_PKP.toLowerCase()) {
    throw new Error("Unauthorized: PKP not allowed to run this action");
  }

  // ... rest of your action logic
}
