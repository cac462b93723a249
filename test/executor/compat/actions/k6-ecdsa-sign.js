// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: k6/LitActionCode/ecdsa-sign.js (whole file)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
async function main() {
  const privateKey = await Lit.Actions.getLitActionPrivateKey();

  const wallet = new ethers.Wallet(privateKey);
  const signature = await wallet.signMessage("Chipotle Rocks!");
  const publicKey = wallet.publicKey;

  return {
    wallet_address: wallet.address,
    signature: signature,
    publicKey: publicKey,
  };
};
