"use strict";
/**
 * The per-run endowments besides the Actions API: a captured `console`, a bounded `sleep`, and the
 * policy-enforcing `fetch`. Each is bound to one RunState and hardened before the action sees it.
 */
const { formatLogArgs, platformError, copyPlain } = require("./values");
const { headersAsPlainObject } = require("./web-facades");

const MAX_CONCURRENT_SLEEPS = 1000;

function makeConsole(run, harden) {
  const write = (...args) => {
    if (run.ended || run.logTruncated) return;
    const line = formatLogArgs(args) + "\n";
    const bytes = Buffer.byteLength(line);
    const room = run.limits.maxLogBytes - run.logBytes;
    if (bytes <= room) {
      run.logBytes += bytes;
      run.post({ type: "log", runId: run.runId, text: line });
      return;
    }
    // Keep what fits (cut on a character boundary), then one marker; later output is dropped.
    run.logTruncated = true;
    const head = Buffer.from(line)
      .subarray(0, Math.max(0, room))
      .toString("utf8")
      .replace(/\uFFFD$/, "");
    run.logBytes = run.limits.maxLogBytes;
    run.post({
      type: "log",
      runId: run.runId,
      text: `${head}\n[sigil: log limit of ${run.limits.maxLogBytes} bytes reached; further output dropped]\n`,
      truncated: true,
    });
  };
  const assert = (condition, ...args) => {
    if (!condition) write("Assertion failed" + (args.length > 0 ? ":" : ""), ...args);
  };
  const group = (...args) => {
    if (args.length > 0) write(...args);
  };
  const ignore = () => {};
  return harden({
    log: write,
    info: write,
    warn: write,
    error: write,
    debug: write,
    trace: write,
    dir: write,
    table: write,
    assert,
    group,
    groupCollapsed: group,
    groupEnd: ignore,
  });
}

function makeSleep(run, harden) {
  return harden(function sleep(ms) {
    run.assertLive();
    const n = Number(ms);
    if (!Number.isFinite(n) || n < 0)
      throw platformError("invalid_argument", "sleep(ms) needs a non-negative number");
    if (n > run.limits.maxSleepMs) {
      throw platformError("invalid_argument", `sleep(ms) is limited to ${run.limits.maxSleepMs} ms per call`);
    }
    if (run.pendingTimers.size >= MAX_CONCURRENT_SLEEPS) {
      throw run.fail("sleep_limit", `more than ${MAX_CONCURRENT_SLEEPS} concurrent sleeps`);
    }
    return new Promise((resolve) => {
      const t = run.timers.setTimeout(() => {
        run.pendingTimers.delete(t);
        if (!run.ended) resolve(undefined);
        run.noteSettled();
      }, n);
      run.pendingTimers.add(t);
    });
  });
}

/**
 * Whether the operator's host allow-list admits the URL. An entry `host:port` admits exactly that
 * host and port; an entry `host` admits that host on the scheme's default port only (80 for http,
 * 443 for https): `api.example.com` does not open `api.example.com:8545`.
 */
function hostAllowed(url, allowHosts) {
  const host = url.host.toLowerCase();
  const hostname = url.hostname.toLowerCase();
  return allowHosts.some((h) => {
    const a = String(h).toLowerCase();
    return a === host || (a === hostname && url.port === "");
  });
}

/** Copy of the request init the action passed: method, headers (plain object) and body (string or bytes). */
function readInit(init) {
  if (init === undefined || init === null) return {};
  if (typeof init !== "object") throw platformError("invalid_argument", "fetch init must be an object");
  const out = {};
  const method = init.method;
  if (method !== undefined) {
    if (typeof method !== "string" || !/^[A-Za-z]{1,16}$/.test(method)) {
      throw platformError("invalid_argument", "fetch method must be an HTTP method name");
    }
    out.method = method.toUpperCase();
  }
  let headers = init.headers;
  // A Headers instance (web-facades.js): read from the host instance it stands for, as a plain object.
  headers = headersAsPlainObject(headers) ?? headers;
  if (headers !== undefined) {
    const h = copyPlain(headers, "fetch headers");
    if (typeof h !== "object" || h === null || Array.isArray(h) || h instanceof Uint8Array) {
      throw platformError("invalid_argument", "fetch headers must be a plain object of strings");
    }
    out.headers = {};
    for (const [k, v] of Object.entries(h)) {
      if (typeof v !== "string")
        throw platformError("invalid_argument", "fetch header values must be strings");
      out.headers[k] = v;
    }
  }
  const body = init.body;
  if (body !== undefined && body !== null) {
    if (typeof body === "string") out.body = body;
    else if (body instanceof Uint8Array) out.body = Uint8Array.from(body);
    else throw platformError("invalid_argument", "fetch body must be a string or a Uint8Array");
  }
  return out;
}

/**
 * `fetch(url, init)`, on by default like the reference runtime's, within the run's fetch policy
 * (fetch-policy.js): http(s) URLs only; if the operator set a host allow-list, only those hosts; and
 * only to addresses the address guard permits (public ones, plus the operator's exceptions), checked
 * on the address actually connected to (enclave/net/guarded-request.js). Counts requests (fatal past
 * maxFetches), never follows redirects (a 3xx is returned to the action, which may fetch the Location
 * itself, through the same checks), times out, caps the body, and answers with a small hardened
 * response object instead of the host's Response.
 */
function makeFetch(run, harden, host) {
  return harden(async function fetch(input, init) {
    // Leftover code of a finished run (e.g. a provider's internal timer) gets no answer, ever.
    if (run.ended) return new Promise(() => {});
    run.assertLive();
    const policy = run.fetchPolicy;
    if (policy === null) throw platformError("fetch_disabled", "fetch is not enabled for this run");
    if (typeof input !== "string")
      throw platformError("invalid_argument", "fetch(url) takes the URL as a string");
    let url;
    try {
      url = new URL(input);
    } catch {
      throw platformError("invalid_argument", "fetch(url): not a valid URL");
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw platformError("invalid_argument", "fetch(url): only http and https URLs");
    }
    if (url.username !== "" || url.password !== "") {
      throw platformError("invalid_argument", "fetch(url): credentials in the URL are not accepted");
    }
    if (policy.allowHosts !== null && !hostAllowed(url, policy.allowHosts)) {
      throw platformError("fetch_host_not_allowed", `host ${url.host} is not in this run's fetch allow-list`);
    }
    const opts = readInit(init);
    if (run.fetches >= run.limits.maxFetches) {
      throw run.fail("fetch_limit", `more than ${run.limits.maxFetches} fetches in one run`);
    }
    run.fetches++;
    run.post({ type: "fetch", runId: run.runId });
    const ac = new host.AbortController();
    run.pendingFetches.add(ac);
    const timer = run.timers.setTimeout(() => ac.abort(), run.limits.fetchTimeoutMs);
    let res;
    try {
      res = await host.request(url, {
        ...opts,
        guard: policy.guard,
        signal: ac.signal,
        maxBodyBytes: run.limits.maxFetchBodyBytes,
      });
    } catch (e) {
      if (run.ended) return new Promise(() => {});
      const code = e && e.code;
      if (code === "address_refused") throw platformError("fetch_address_refused", e.message);
      if (code === "body_too_large") throw platformError("fetch_response_too_large", e.message);
      if (ac.signal.aborted)
        throw platformError("fetch_timeout", `no complete answer within ${run.limits.fetchTimeoutMs} ms`);
      throw platformError("fetch_failed", `request to ${url.host} failed`);
    } finally {
      run.timers.clearTimeout(timer);
      run.pendingFetches.delete(ac);
      run.noteSettled();
    }
    if (run.ended) return new Promise(() => {});
    const body = res.body;
    const text = () => new TextDecoder().decode(body);
    return harden({
      ok: res.status >= 200 && res.status < 300,
      status: res.status,
      statusText: res.statusText,
      url: url.href,
      headers: res.headers,
      text: async () => text(),
      json: async () => JSON.parse(text()),
      bytes: async () => Uint8Array.from(body),
      arrayBuffer: async () => Uint8Array.from(body).buffer,
    });
  });
}

module.exports = { makeConsole, makeSleep, makeFetch };
