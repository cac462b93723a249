/**
 * The real stack with billing (real ledger, simulated processor) for the charge tests, and a barrier on
 * the relayer's forward-request signatures: with it armed for `n`, the next `n` signatures wait for
 * each other and are released in one tick, so those writes are queued together and leave in one
 * executeBatch (deterministic batching, as in test/relayer/batch.test.ts).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { Enclave } from "../../enclave";
import { createBilling, SimulatedProcessor, type Billing } from "../../relayer/billing";
import type { RelayerOptions } from "../../relayer";
import { startStack, type Stack } from "../helpers/stack";

export interface BilledStack {
  s: Stack;
  billing: Billing;
  ledgerPath: string;
  dir: string;
  /** The next `n` forward-request signatures are held until all `n` are made. */
  batchNext(n: number): void;
  close(): Promise<void>;
}

export async function startBilledStack(
  opts: { signupCreditCents?: number; relayer?: Partial<RelayerOptions> } = {},
): Promise<BilledStack> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-billed-"));
  const ledgerPath = path.join(dir, "ledger.sqlite");
  const billing = await createBilling({
    dbPath: ledgerPath,
    processor: new SimulatedProcessor(),
    signupCreditCents: opts.signupCreditCents ?? 100,
    chargeFlushMs: 0,
  });
  let s: Stack;
  try {
    s = await startStack({ billing, ...opts.relayer });
  } catch (err) {
    await billing.close();
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  let barrier: { n: number; waiting: Array<() => void> } | null = null;
  const real = s.enclave;
  // Same enclave (same gas wallets, same keys); only signForwardRequest is wrapped. Methods are bound
  // to the real object, whose private fields a proxy cannot reach.
  const wrapped = new Proxy(real, {
    get(target, prop) {
      if (prop === "signForwardRequest") {
        return async (...args: Parameters<Enclave["signForwardRequest"]>) => {
          const signed = await target.signForwardRequest(...args);
          const b = barrier;
          if (b) {
            await new Promise<void>((release) => {
              b.waiting.push(release);
              if (b.waiting.length >= b.n) {
                barrier = null;
                for (const r of b.waiting) r();
              }
            });
          }
          return signed;
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  s.relayerOptions.enclave = wrapped;
  await s.restartRelayer();
  return {
    s,
    billing,
    ledgerPath,
    dir,
    batchNext(n) {
      barrier = { n, waiting: [] };
    },
    async close() {
      await s.close();
      await billing.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function newAccount(b: BilledStack): Promise<{ key: string; accountId: string }> {
  const r = await b.s.api("POST", "/core/v1/new_account", { body: {} });
  if (r.status !== 201) throw new Error(`new_account: ${r.status} ${JSON.stringify(r.body)}`);
  return { key: r.body.api_key as string, accountId: String(r.body.account_id) };
}

export async function balanceOf(b: BilledStack, key: string): Promise<number> {
  const r = await b.s.api("GET", "/core/v1/billing/balance", { key });
  if (r.status !== 200) throw new Error(`balance: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.balance_cents as number;
}
