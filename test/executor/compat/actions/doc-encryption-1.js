// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: docs/lit-actions/migration/encryption.mdx (JavaScript code block 1)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
// jsParams: { pkpId, message, optional-userToken }
async function main({ pkpId, message }) {
  // Optional gate: verify caller before encrypting
  const authRes = await someGatedCheck();
  if (!authRes.ok) {
    return { error: 'Unauthorized' };
  }

  const ciphertext = await Lit.Actions.Encrypt({ pkpId, message });
  return { ciphertext };
}
