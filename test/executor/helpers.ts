/**
 * Shared fixtures of the executor tests: key capabilities with real derived keys, a PKP registry for
 * the authorization callback, and the pool-health check that runs after every hostile case.
 */
import { expect } from "chai";
import { ethers } from "ethers";
import type { KeyCapabilities } from "../../enclave/capabilities";
import { ActionExecutor, type RunRequest, type RunResult } from "../../enclave/executor";
import { Enclave } from "../../enclave";

export const TEST_CID = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
export const OTHER_CID = "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH";

/** The real enclave, on a fixed test root key: every key below is derived as in production. */
export function makeKeys(): KeyCapabilities {
  return Enclave.fromRootKey("0x" + "5a".repeat(32));
}

/** Two PKPs the caller may use, one it may not. */
export function pkpIds(): { allowed: string; second: string; refused: string } {
  const id = (n: number) => ethers.zeroPadValue(ethers.toBeHex(n), 32);
  return { allowed: id(101), second: id(102), refused: id(103) };
}

export const REFUSAL_MESSAGE = "this key has no execute scope on a group listing this action and PKP";

/**
 * The relayer's side of authorization, in miniature: resolves an id or address to the id, and refuses
 * PKPs outside `allowed`. Records every call so tests can assert what was authorized.
 */
export function makeAuthorizer(keys: KeyCapabilities, allowed: string[]) {
  const calls: string[] = [];
  const byAddress = new Map(allowed.map((id) => [keys.pkpAddress(id).toLowerCase(), id]));
  const authorizePkp = async (pkpIdOrAddress: string): Promise<string> => {
    calls.push(pkpIdOrAddress);
    const lower = pkpIdOrAddress.toLowerCase();
    const id = byAddress.get(lower) ?? allowed.find((a) => a.toLowerCase() === lower);
    if (id === undefined) throw new Error(REFUSAL_MESSAGE);
    return id;
  };
  return { authorizePkp, calls };
}

export type Runner = (code: string, extra?: Partial<RunRequest>) => Promise<RunResult>;

export function makeRunner(executor: ActionExecutor, keys: KeyCapabilities): Runner {
  const { allowed, second } = pkpIds();
  const { authorizePkp } = makeAuthorizer(keys, [allowed, second]);
  return (code, extra = {}) => executor.run({ code, cid: TEST_CID, authorizePkp, ...extra });
}

/**
 * A one-worker executor for the enclosing describe block: started in its `before`, closed in its
 * `after`. `run` may be taken at once (it delegates to the runner made in `before`); `executor` is read
 * inside tests and hooks.
 */
export function useExecutor(
  keys: KeyCapabilities,
  opts: { poolSize?: number } = {},
): { readonly executor: ActionExecutor; run: Runner } {
  let executor: ActionExecutor | undefined;
  let runner: Runner | undefined;
  before(async function () {
    executor = new ActionExecutor({ keys, poolSize: opts.poolSize ?? 1 });
    await executor.ready();
    runner = makeRunner(executor, keys);
  });
  after(async function () {
    await executor?.close();
  });
  return {
    get executor() {
      if (!executor) throw new Error("useExecutor: the executor starts in the block's before hook");
      return executor;
    },
    run: (code, extra) => runner!(code, extra),
  };
}

export async function waitFor(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The pool is back at full strength and a normal run in it succeeds. */
export async function expectHealthy(executor: ActionExecutor, run: Runner): Promise<void> {
  const ok = await run(`async function main(p) { return { echo: p.n + 1 }; }`, { jsParams: { n: 41 } });
  expect(ok.has_error, JSON.stringify(ok.error)).to.equal(false);
  expect(ok.response).to.deep.equal({ echo: 42 });
  const poolSize = executor.stats().poolSize;
  await waitFor(() => executor.stats().alive === poolSize);
  expect(executor.stats().busy).to.equal(0);
}

/** The run succeeded (its error and logs in the failure message); its response. */
export function expectOk(r: RunResult): unknown {
  expect(r.has_error, JSON.stringify(r.error) + r.logs).to.equal(false);
  return r.response;
}
