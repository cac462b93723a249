"use strict";
/**
 * The arguments of `Actions.sendTransaction({pkpId, chainId, tx, wait})`, copied into plain data for
 * the key operation `pkpSendTransaction` (the enclave side fills, simulates, signs and broadcasts:
 * enclave/executor/send/). Nothing here reaches a chain: the action names a chain id, never a URL.
 */
const { platformError, copyPlain } = require("./values");

function readSendArgs(a) {
  const chainId = a.chainId;
  if (typeof chainId !== "number" || !Number.isSafeInteger(chainId) || chainId < 1)
    throw platformError("invalid_argument", "sendTransaction: chainId must be a positive integer");
  const tx = a.tx;
  if (typeof tx !== "object" || tx === null || Array.isArray(tx))
    throw platformError(
      "invalid_argument",
      "sendTransaction: tx must be an object, e.g. { to, value, data }",
    );
  const wait = a.wait;
  let waitArg;
  if (wait === undefined || wait === true || wait === false) waitArg = wait;
  else if (typeof wait === "object" && wait !== null) waitArg = { confirmations: wait.confirmations };
  else
    throw platformError("invalid_argument", "sendTransaction: wait must be true, false or { confirmations }");
  const out = { chainId, transaction: copyPlain(tx, "sendTransaction tx") };
  if (waitArg !== undefined) out.wait = copyPlain(waitArg, "sendTransaction wait");
  return out;
}

module.exports = { readSendArgs };
