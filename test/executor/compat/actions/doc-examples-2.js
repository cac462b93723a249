// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: docs/lit-actions/examples.mdx (JavaScript code block 2)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
// js_params: { pkpId, secret }
async function main({ pkpId, secret }) {
  const ciphertext = await Lit.Actions.Encrypt({ pkpId, message: secret });
  return { ciphertext };
}
