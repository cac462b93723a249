// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: docs/lit-actions/migration/changes.mdx (JavaScript code block 7)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
async function main({ pkpId, message }) {
  const wallet = new ethers.Wallet(await Lit.Actions.getPrivateKey({ pkpId }));
  const sig = await wallet.signMessage(message);
  return sig;
}
