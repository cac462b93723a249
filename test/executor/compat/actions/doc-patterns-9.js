// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: docs/lit-actions/patterns.mdx (JavaScript code block 9)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
// Encrypt the API key portion once and store the ciphertext.
// js_params: { pkpId, apiKey }
async function main({ pkpId, apiKey }) {
  const ciphertext = await Lit.Actions.Encrypt({ pkpId, message: apiKey });
  return { ciphertext };
}
