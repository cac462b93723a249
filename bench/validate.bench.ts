/**
 * Reading a typical svc_action body by its declaration, two ways in the same run: the house's schema
 * interpreter (relayer/routes/bodySchema.ts, compiled once into closures, with the declaration's own
 * checks and the house's messages) and ajv compiling the same schema to code (standard keywords and the
 * same id formats, then the declaration's own checks of js_params and timeout_ms, which no schema can
 * say; without the house's messages or canonical ids: the least an ajv reader would do). Prints µs per
 * body and the ratio house / ajv; below 1 the house's reader is the faster.
 *
 *   npm run bench:validate
 */
import Ajv from "ajv";
import { isValidCid } from "../enclave";
import type { RelayerContext } from "../relayer/context";
import { compileBody } from "../relayer/routes/bodySchema";
import { ACTION_ENDPOINTS } from "../relayer/routes/actions";

const svcAction = ACTION_ENDPOINTS.find((e) => e.path === "/svc_action")!;
const ctx = { cfg: {} } as RelayerContext;

const body = {
  cid: "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o",
  pkp_id: "0x" + "ab".repeat(32),
  js_params: { to: "0x" + "11".repeat(20), amount: "1000000000000000000", memo: "invoice 42", nonce: 7 },
  timeout_ms: 5_000,
};

const house = compileBody(svcAction.body!, svcAction.checks);
const ajv = new Ajv({ strict: false });
ajv.addFormat("cid", (v: string) => isValidCid(v));
ajv.addFormat("pkp-ref", /^0x([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$/);
const ajvSchema = ajv.compile(svcAction.body!);
const checks = Object.entries(svcAction.checks ?? {});
const ajvValidate = (b: Record<string, unknown>): boolean => {
  if (!ajvSchema(b)) return false;
  for (const [field, check] of checks) check(b[field], ctx);
  return true;
};

function measure(fn: () => void, iterations: number): number {
  for (let i = 0; i < Math.min(2_000, iterations); i++) fn();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) fn();
  return Number(process.hrtime.bigint() - t0) / iterations / 1e3;
}

if (!ajvValidate(body)) throw new Error(`ajv refuses the body: ${ajv.errorsText(ajvSchema.errors)}`);
house(body, ctx);
const iterations = Number(process.env.ITERATIONS ?? 200_000);
// Interleaved rounds, so a neighbour's load on this shared machine falls on both alike.
const rounds = 5;
let houseUs = 0;
let ajvUs = 0;
for (let r = 0; r < rounds; r++) {
  houseUs += measure(() => void house(body, ctx), iterations) / rounds;
  ajvUs += measure(() => void ajvValidate(body), iterations) / rounds;
}
console.log(`svc_action body, ${iterations} × ${rounds} rounds`);
console.log(`  house reader  ${houseUs.toFixed(3).padStart(8)} µs`);
console.log(`  ajv compiled  ${ajvUs.toFixed(3).padStart(8)} µs`);
console.log(`  house / ajv   ${(houseUs / ajvUs).toFixed(2)}`);
