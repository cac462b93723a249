// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: docs/lit-actions/patterns.mdx (JavaScript code block 5)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
async function main({ signature, message }) {
  const ALLOWED_ADDRESS = "0xAbc123..."; // the authorized caller's wallet address

  // message should contain a nonce or timestamp for replay protection
  const recovered = ethers.utils.verifyMessage(message, signature);
  if (recovered.toLowerCase() !== ALLOWED_ADDRESS.toLowerCase()) {
    throw new Error("Unauthorized: caller signature does not match allowed address");
  }

  // ... rest of your action logic
}
