// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: docs/lit-actions/migration/encryption.mdx (JavaScript code block 2)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
// jsParams: { pkpId, ciphertext, optional-userToken }
async function main({ pkpId, ciphertext }) {
  // Optional gate: check condition before decrypting
  const authRes = await someGatedCheck();
  if (!authRes.ok) {
    return { error: 'Unauthorized' };
  }

  const plaintext = await Lit.Actions.Decrypt({ pkpId, ciphertext });
  return { plaintext };
}
