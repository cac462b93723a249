// Compatibility corpus: unchanged from github.com/LIT-Protocol/chipotle
// repository: LIT-Protocol/chipotle
// path: docs/lit-actions/migration/changes.mdx (JavaScript code block 9)
// commit: 7e664bba8c69526d4b7e466e378f6dad37e14968
const tokenId = ethers.utils.keccak256(publicKey);
