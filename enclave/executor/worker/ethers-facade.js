"use strict";
/**
 * The `ethers` objects endowed to actions. Both packages are loaded in the worker BEFORE lockdown (their
 * CommonJS builds need Node's crypto and initialise module state in a normal realm), then hardened once
 * per worker.
 *
 * - `ethers` is **ethers v5** (the package installed as `ethers5`), the API the reference runtime's
 *   actions are written against (`ethers.utils.*`, `BigNumber`, `Wallet` with `publicKey`, `Contract`,
 *   `providers.JsonRpcProvider`), plus every ethers v6 top-level name that v5 does not have
 *   (`ethers.keccak256`, `ethers.getBytes`, `ethers.Signature`, …), so actions written for Sigil's
 *   earlier v6-only `ethers` keep working. Where both have a name (`Wallet`, `Contract`, `version`, …),
 *   v5 wins.
 * - `ethers6` is the v6 facade alone.
 *
 * Why not endow the packages as they are:
 * - Providers, FetchRequest, Network, plugins (v6), `utils.fetchJson`/`utils.poll` (v5) perform I/O with
 *   the worker's full host authority and keep mutable module-level registries. They would bypass the
 *   fetch policy and let one run influence the next one in the same worker. They are left out. v5's
 *   `providers.JsonRpcProvider` is given back (makeProviders), built on the constructing run's own
 *   `fetch`, so its traffic obeys the fetch policy and counts as fetches.
 * - v6 crypto primitives are swappable (`keccak256.register`, …); `ethers.lock()` freezes them first.
 *   v5 has no such registry, but its Logger has process-wide switches (`setLogLevel`, `setCensorship`)
 *   a run could flip for every later run: they are replaced by functions that refuse.
 * - Lazily created singletons (v6's English wordlist and default AbiCoder, v5's global Logger) are not
 *   reachable at harden time; they are created now and hardened.
 */
const path = require("node:path");
// The modules both ethers load (their module graphs), hardened once per worker (hardenEthersModules).
const loadedBefore = new Set(Object.keys(require.cache));
const ethers = require("ethers");
const ethers5 = require("ethers5");
// Only ethers' own packages (not their dependencies, nor packages nested under them): dependencies
// keep scratch state in objects their exports reach (elliptic's curves) or extend Node's classes (ws:
// EventEmitter, whose prototype Node's own streams write through), and actions reach none of them
// (test/executor/reachability.test.ts). For the same reason v5's `ws.js`, which re-exports ws, is left.
const ETHERS_PACKAGE =
  /[\\/]node_modules[\\/](ethers|ethers5|@ethersproject[\\/][^\\/]+)[\\/](?!.*node_modules)/;
const NOT_HARDENED = /[\\/]providers[\\/]lib[\\/]ws\.js$/;
const ETHERS_MODULES = Object.keys(require.cache).filter(
  (file) => !loadedBefore.has(file) && ETHERS_PACKAGE.test(file) && !NOT_HARDENED.test(file),
);
const { platformError } = require("./values");

/**
 * ethers v5's own HTTP client (`@ethersproject/web`), which its provider base classes call by module
 * property at call time. The endowed providers send through the run's `fetch`, but their base classes
 * are reachable (`Object.getPrototypeOf(ethers.providers.JsonRpcProvider)`), and an instance of a base
 * class would send with the worker's host authority, past the fetch policy and the address guard. Both
 * entry points refuse, before lockdown (after it the module object is frozen).
 */
function refuseEthers5HttpClient() {
  const webPath = require.resolve("@ethersproject/web", {
    paths: [
      path.dirname(require.resolve("@ethersproject/providers", { paths: [require.resolve("ethers5")] })),
    ],
  });
  const web = require(webPath);
  const refuse = async () => {
    throw platformError(
      "invalid_argument",
      "ethers' own HTTP client is not available in actions; ethers.providers.JsonRpcProvider sends through fetch",
    );
  };
  web.fetchJson = refuse;
  web._fetchData = refuse;
}
refuseEthers5HttpClient();

const EXCLUDED =
  /(Provider|Plugin|Subscriber)$|^(Fetch|Socket)|^(ethers|Network|EnsResolver|JsonRpcSigner|getDefaultProvider|showThrottleMessage|lock)$/;

/** v5 exports with host I/O or that are replaced per run. */
const EXCLUDED_V5 = new Set(["ethers", "providers", "getDefaultProvider"]);
const EXCLUDED_V5_UTILS = new Set(["fetchJson", "poll", "_fetchData"]);
/** The pure parts of v5's `providers` namespace, shared by every run. */
/** How often tx.wait() asks for the receipt. */
const RECEIPT_POLL_MS = 250;
const V5_PROVIDER_HELPERS = ["getNetwork", "Formatter", "isCommunityResource", "isCommunityResourcable"];

/**
 * v6 state shared across runs that hardening does not cover, closed before the facade is hardened:
 * - `Contract#emit` chains every emit of the worker on one module-level promise, so a run's rejected
 *   or never-settling emit was awaited by the next run's (its error handed over, or that run stuck).
 *   Contract events need a v6 provider, which actions do not get: `emit` refuses.
 * - `LangXx.wordlist(dialect)` creates and caches a wordlist on first use (for any dialect string):
 *   the real ones are created now (and hardened with the module graph), other dialects refuse.
 */
function closeEthers6SharedState() {
  Object.defineProperty(ethers.BaseContract.prototype, "emit", {
    configurable: true,
    writable: true,
    value: async function emit() {
      throw platformError("invalid_argument", "contract events are not available in actions");
    },
  });
  // Each language's class is reached as `ethers.wordlists.<lang>.constructor`.
  for (const wordlist of Object.values(ethers.wordlists)) {
    const Lang = wordlist.constructor;
    if (Lang.name !== "LangZh") {
      Lang.wordlist();
      continue;
    }
    const zh = { cn: Lang.wordlist("cn"), tw: Lang.wordlist("tw") };
    Object.defineProperty(Lang, "wordlist", {
      configurable: true,
      writable: true,
      value: function wordlist(dialect) {
        if (!Object.prototype.hasOwnProperty.call(zh, dialect))
          throw platformError("invalid_argument", 'LangZh.wordlist(dialect): dialect is "cn" or "tw"');
        return zh[dialect];
      },
    });
  }
}

function makeEthersFacade(harden) {
  closeEthers6SharedState();
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

function lockV5Logger(harden) {
  const { Logger } = ethers5.utils;
  const refuse = (name) =>
    function () {
      throw new TypeError(
        `ethers.utils.Logger.${name} is not available in actions (it is shared by all runs)`,
      );
    };
  Logger.setLogLevel = refuse("setLogLevel");
  Logger.setCensorship = refuse("setCensorship");
  harden(Logger.globalLogger());
}

/**
 * The v5 `ethers` of every run, merged with the v6 names v5 lacks. Built and hardened once per worker,
 * after lockdown. `runFetch()` answers the fetch of the run in progress (see makeProviders).
 */
function makeEthers5(harden, v6Facade, runFetch, runSleep) {
  lockV5Logger(harden);
  const base = {};
  for (const [name, value] of Object.entries(v6Facade)) base[name] = value;
  for (const name of Object.keys(ethers5)) {
    if (!EXCLUDED_V5.has(name)) base[name] = ethers5[name];
  }
  const utils = {};
  for (const name of Object.keys(ethers5.utils)) {
    if (!EXCLUDED_V5_UTILS.has(name)) utils[name] = ethers5.utils[name];
  }
  base.utils = utils;
  base.providers = makeProviders(harden, runFetch, runSleep);
  harden(ethers5.utils.defaultAbiCoder);
  harden(ethers5.wordlists);
  return harden(base);
}

/**
 * `ethers.providers`: the pure helpers, and JsonRpcProvider / StaticJsonRpcProvider built on the fetch
 * of the run that constructs them. Every JSON-RPC request goes through that fetch: the fetch policy
 * applies (no loopback or private addresses unless the operator allows them), it counts against
 * maxFetches, and after that run has ended it never answers (so a provider's internal timers cannot
 * call back into a finished run). The classes are shared by all runs of the worker (built once, so a
 * warm run pays nothing for them); a provider is bound to its run when it is constructed, which only
 * that run's code can do: code of a finished run never runs again (docs/actions.md, "Runs cannot leak
 * into each other"). Provider events (`on`, polling) would start host timers that outlive the run:
 * they are refused. No other v5 provider path reachable from an action schedules host timers: network
 * detection (constructor), `send`'s cache, `_waitForTransaction` and events are all replaced here.
 */
function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function makeProviders(harden, runFetch, runSleep) {
  const fetchOf = new WeakMap(); // provider -> the fetch of the run that constructed it
  const sleepOf = new WeakMap(); // provider -> the sleep of the run that constructed it
  const helpers = {};
  for (const name of V5_PROVIDER_HELPERS) helpers[name] = ethers5.providers[name];
  const { getNetwork } = ethers5.providers;
  const { BigNumber } = ethers5;

  class JsonRpcProvider extends ethers5.providers.JsonRpcProvider {
    constructor(url, network) {
      // Without a network, v5's constructor starts detection on a host `setTimeout(…, 0)`: a timer of
      // the worker's realm that no run tracks, so an action in the `(async () => …)()` or `go()` style
      // (where the run lasts as long as its pending work) was reported finished before the provider's
      // first answer. Detection starts here instead, on the constructing run's fetch, which the run
      // waits for, counts against maxFetches and aborts when it ends: no host timer is left to fire in
      // a later run.
      const detection = network == null ? deferred() : null;
      super(url, detection === null ? network : detection.promise);
      fetchOf.set(this, runFetch());
      sleepOf.set(this, runSleep());
      // The base constructor attaches a handler to the promise: a failed detection is reported by the
      // provider's calls, not as an unhandled rejection.
      if (detection !== null) this.detectNetwork().then(detection.resolve, detection.reject);
    }

    /**
     * `tx.wait()` and `provider.waitForTransaction()`: v5 waits with block events (host timers that
     * would outlive the run); this polls the receipt with the run's own `sleep` instead. Each poll is a
     * request (it counts against maxFetches).
     */
    async _waitForTransaction(transactionHash, confirmations, timeout) {
      const wanted = confirmations == null ? 1 : confirmations;
      const deadline = timeout ? Date.now() + timeout : Infinity;
      const sleep = sleepOf.get(this) ?? runSleep();
      for (;;) {
        const receipt = await this.getTransactionReceipt(transactionHash);
        if (wanted === 0 || (receipt != null && receipt.confirmations >= wanted)) return receipt;
        if (Date.now() > deadline) throw new Error(`timeout waiting for transaction ${transactionHash}`);
        await sleep(RECEIPT_POLL_MS);
      }
    }

    async send(method, params) {
      const request = { method, params, id: this._nextId++, jsonrpc: "2.0" };
      // The base constructor may call send (network detection) before fetchOf is set: same run.
      const fetch = fetchOf.get(this) ?? runFetch();
      const res = await fetch(this.connection.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(request),
      });
      const text = await res.text();
      let payload;
      try {
        payload = JSON.parse(text);
      } catch {
        throw new Error(`JSON-RPC ${method}: the server answered ${res.status} with a body that is not JSON`);
      }
      if (payload !== null && typeof payload === "object" && payload.error) {
        const e = new Error(String(payload.error.message ?? "JSON-RPC error"));
        e.code = payload.error.code;
        e.data = payload.error.data;
        throw e;
      }
      if (payload === null || typeof payload !== "object" || !("result" in payload)) {
        throw new Error(`JSON-RPC ${method}: the answer has no result (HTTP ${res.status})`);
      }
      return payload.result;
    }

    // v5's own detectNetwork turns every failure into "could not detect network", which would hide a
    // fetch policy refusal (fetch_address_refused, fetch_host_not_allowed) behind a vague message. It
    // also asks eth_chainId again before most calls; a provider lives for one run at most, so the chain
    // id is asked once (every request counts against maxFetches).
    detectNetwork() {
      if (this._runNetwork === undefined) {
        this._runNetwork = this.send("eth_chainId", []).then(
          (chainId) => getNetwork(BigNumber.from(chainId).toNumber()),
          (e) => {
            this._runNetwork = undefined;
            throw e;
          },
        );
      }
      return this._runNetwork;
    }

    _startEvent() {
      throw platformError(
        "invalid_argument",
        "provider events and polling are not available in actions; await the calls instead",
      );
    }
  }
  // Same behaviour: the chain id is already asked once per provider.
  class StaticJsonRpcProvider extends JsonRpcProvider {}
  return harden({ ...helpers, JsonRpcProvider, StaticJsonRpcProvider });
}

/** v5's standard networks whose definition holds a function (`_defaultProvider`) shared by all runs. */
const V5_NETWORKS_WITH_DEFAULTS = [
  "homestead",
  "ropsten",
  "rinkeby",
  "kovan",
  "goerli",
  "sepolia",
  "holesky",
  "classic",
  "classicMordor",
  "classicKotti",
  "matic",
  "maticmum",
  "optimism",
];

/**
 * Every object of both ethers' module graphs, hardened once per worker, after lockdown and after the
 * facades are built. The facades only name the exports actions use, but what their functions return
 * reaches further: instances of classes that are not exported by `ethers` itself (v5's FixedFormat, as
 * `FixedNumber.from("1").format`; the ABI Writer; JsonRpcSigner), module-level singletons (v5's shared
 * provider Formatter and its format tables; the standard networks' default-provider functions), and
 * these are shared by every run of the worker. Hardening each module's exports reaches the classes; the
 * lazily created singletons are created first, then hardened. (Lazy state kept in module closures, such
 * as v5's secp256k1 curve, is not reachable from exports and is left alone.)
 */
function hardenEthersModules(harden) {
  for (const C of Object.values(ethers5.providers)) {
    if (typeof C === "function" && typeof C.getFormatter === "function") harden(C.getFormatter());
  }
  for (const name of V5_NETWORKS_WITH_DEFAULTS) harden(ethers5.providers.getNetwork(name));
  // Not exported by its module: reached through a signer.
  const provider = new ethers5.providers.JsonRpcProvider("http://127.0.0.1:1", 1);
  harden(Object.getPrototypeOf(provider.getUncheckedSigner()));
  for (const file of ETHERS_MODULES) {
    const m = require.cache[file];
    if (m !== undefined) harden(m.exports);
  }
}

module.exports = { makeEthersFacade, makeEthers5, hardenEthersModules, EXCLUDED };
