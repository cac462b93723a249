"use strict";
/**
 * The `ethers` object endowed to actions: ethers v6, loaded in the worker BEFORE lockdown (its CommonJS
 * build needs Node's crypto and must initialise its module state in a normal realm), then hardened.
 *
 * Why not endow ethers as is:
 * - Providers, FetchRequest, Network and plugins perform I/O (http, https, WebSocket, IPC sockets) with
 *   the worker's full host authority and keep mutable module-level registries (Network.register,
 *   FetchRequest.registerGetUrl). They would bypass the fetch allow-list and let one run influence the
 *   next one in the same worker. They are left out: actions do chain reads with `fetch`.
 * - ethers' crypto primitives are swappable (`keccak256.register`, `randomBytes.register`, ...); a run
 *   could replace them for every later run in the worker. `ethers.lock()` freezes them first.
 * - `ethers.ethers` (the whole namespace again, providers included) is left out for the same reason.
 * - Lazily created singletons (the English wordlist, the default AbiCoder) are not reachable at harden
 *   time; they are created now and hardened, so a run cannot patch the wordlist that later runs derive
 *   mnemonics with, or the coder that later runs encode calldata with.
 */
const ethers = require("ethers");

const EXCLUDED =
  /(Provider|Plugin|Subscriber)$|^(Fetch|Socket)|^(ethers|Network|EnsResolver|JsonRpcSigner|getDefaultProvider|showThrottleMessage|lock)$/;

function makeEthersFacade(harden) {
  ethers.lock();
  const facade = {};
  for (const name of Object.keys(ethers)) {
    if (!EXCLUDED.test(name)) facade[name] = ethers[name];
  }
  harden(ethers.LangEn.wordlist());
  harden(ethers.wordlists);
  harden(ethers.AbiCoder.defaultAbiCoder()); // shared by Interface and Contract encoding
  return harden(facade);
}

module.exports = { makeEthersFacade, EXCLUDED };
