/**
 * Every key operation of a run is in its audit entry, with or without a signing policy, whichever side
 * served it: the worker's trusted side (the run's own PKP, named by the request) or the enclave side
 * (a PKP the request did not name, and every transaction). Each signature's digest is recomputed here
 * with ethers from what the action signed. A hostile action can neither reach the recorder nor forge a
 * record through its response, and one that throws after signing still has its signature listed.
 */
import { expect } from "chai";
import { Transaction, TypedDataEncoder, hashMessage } from "ethers";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

// Answers are whatever JSON the API returned; the tests assert on their shape.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const DOMAIN = { name: "Audit", version: "1", chainId: 31337 };
const TYPES = { Note: [{ name: "text", type: "string" }] };
const VALUE = { text: "typed audit" };
const TX = {
  type: 2,
  chainId: 31337,
  nonce: 3,
  gasLimit: 21000,
  maxFeePerGas: 10,
  maxPriorityFeePerGas: 1,
  to: "0x000000000000000000000000000000000000dEaD",
  value: 5,
};

const ACTION = `async function main(p) {
  const domain = ${JSON.stringify(DOMAIN)};
  const types = ${JSON.stringify(TYPES)};
  const value = ${JSON.stringify(VALUE)};
  const transaction = ${JSON.stringify(TX)};
  if (p.mode === "three") {
    const message = await Actions.signMessage({ pkpId: p.pkp, message: "audit three" });
    const typed = await Actions.signTypedData({ pkpId: p.pkp, domain, types, value });
    const tx = await Actions.signTransaction({ pkpId: p.pkp, transaction });
    return { message, typed, tx };
  }
  if (p.mode === "throw") {
    await Actions.signMessage({ pkpId: p.pkp, message: "signed, then thrown" });
    throw new Error("hide me");
  }
  // hostile: look for anything that records key operations, then try to forge records.
  const found = [];
  const seen = new Set();
  const walk = (o, path, depth) => {
    if (o === null || (typeof o !== "object" && typeof o !== "function") || seen.has(o) || depth > 4) return;
    seen.add(o);
    let names = [];
    try { names = Reflect.ownKeys(o); } catch { return; }
    for (const n of names) {
      const name = String(n);
      if (/keyOperation|recordKey|localKeyOps|postMessage|parentPort/i.test(name)) found.push(path + "." + name);
      let v;
      try { v = o[n]; } catch { continue; }
      walk(v, path + "." + name, depth + 1);
    }
    try { walk(Object.getPrototypeOf(o), path + ".__proto__", depth + 1); } catch {}
  };
  walk(globalThis, "globalThis", 0);
  const forged = { kind: "message", pkp: p.pkp, digest: "0x" + "11".repeat(32) };
  try { Actions.keyOperations = [forged]; } catch {}
  try { globalThis.keyOperations = [forged]; } catch {}
  await Actions.signMessage({ pkpId: p.pkp, message: "the one real signature" });
  return { found, key_operations: [forged, forged], policy_decisions: [{ allowed: true, rule: "forged", operation: "message", pkp: p.pkp, digest: forged.digest }] };
}`;

describe("audit log: every key operation of a run, with its digest", function () {
  this.timeout(180_000);
  let s: Stack;
  let a: Awaited<ReturnType<typeof setupAccount>>;

  before(async () => {
    s = await startStack({ executor: { poolSize: 1 } });
    a = await setupAccount(s, ACTION);
  });
  after(async () => {
    await s?.close();
  });

  const run = async (mode: string, namePkp: boolean) => {
    const r = await s.api("POST", "/core/v1/svc_action", {
      key: a.accountKey,
      body: { cid: a.cid, ...(namePkp ? { pkp_id: a.pkpId } : {}), js_params: { pkp: a.pkpId, mode } },
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    const requestId = r.headers.get("x-request-id");
    const list = await fetch(`${s.url}/core/v1/audit?type=execution`, {
      headers: { "x-api-key": a.accountKey },
    }).then((x) => x.json() as Promise<Json>);
    const entry = (list.items as Json[]).find((e) => e.data.request_id === requestId);
    expect(entry, "the run's entry").to.not.equal(undefined);
    return { body: r.body as Json, data: entry.data as Json };
  };

  const pkp = () => a.pkpId.toLowerCase();
  const expectedThree = (body: Json) => [
    { operation: "message", allowed: true, pkp: pkp(), digest: hashMessage("audit three") },
    {
      operation: "typedData",
      allowed: true,
      pkp: pkp(),
      digest: TypedDataEncoder.hash(DOMAIN, TYPES, VALUE),
    },
    {
      operation: "transaction",
      allowed: true,
      pkp: pkp(),
      digest: Transaction.from(body.response.tx).unsignedHash,
    },
  ];
  const byOperation = (ops: Json[]) => [...ops].sort((x, y) => (x.operation < y.operation ? -1 : 1));

  for (const namePkp of [true, false]) {
    const side = namePkp ? "the worker signs the run's own PKP" : "the enclave side signs";
    it(`a run without a policy lists a message, a typed-data and a transaction signature (${side})`, async () => {
      const { body, data } = await run("three", namePkp);
      expect(body.has_error, JSON.stringify(body)).to.equal(false);
      expect(data.key_operation_count).to.equal(3);
      expect(byOperation(data.key_operations)).to.deep.equal(byOperation(expectedThree(body)));
    });
  }

  it("a run that throws after signing still lists its signature", async () => {
    const { body, data } = await run("throw", true);
    expect(body.has_error).to.equal(true);
    expect(data.has_error).to.equal(true);
    expect(data.key_operations).to.deep.equal([
      { operation: "message", allowed: true, pkp: pkp(), digest: hashMessage("signed, then thrown") },
    ]);
  });

  it("a hostile action cannot reach the recorder, and its response forges nothing", async () => {
    const { body, data } = await run("hostile", true);
    expect(body.has_error, JSON.stringify(body)).to.equal(false);
    expect(body.response.found).to.deep.equal([]);
    expect(data.key_operation_count).to.equal(1);
    expect(data.key_operations).to.deep.equal([
      { operation: "message", allowed: true, pkp: pkp(), digest: hashMessage("the one real signature") },
    ]);
  });
});
