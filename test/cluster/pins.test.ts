/**
 * Pinned code behind `npm run start:cluster` (issue 24, part 4): two instance processes on one
 * PostgreSQL and one chain, started by the cluster script's own functions, each with its own data
 * folder (and so its own content store on disk). Code pinned through one instance is served by the
 * other at once, by CID: the pinned bytes are in the shared database, not only in the content store of
 * the instance that received them.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { eventually } from "../../testkit/eventually";
import { startCluster, type Cluster } from "../../scripts/cluster/cluster";

type Json = Record<string, unknown>;

async function call(url: string, method: string, route: string, key?: string, body?: unknown) {
  const r = await fetch(url + route, {
    method,
    headers: {
      ...(key ? { "x-api-key": key } : {}),
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as Json };
}

describe("cluster: code pinned through one instance runs through another", function () {
  this.timeout(240_000);
  let dir: string;
  let cluster: Cluster;
  let one: string;
  let two: string;
  let key: string;

  before(async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-cluster-pins-"));
    cluster = await startCluster({
      dataDir: dir,
      instances: 2,
      basePort: 0,
      anvilPort: 0,
      env: { SIGIL_EXECUTOR_POOL_SIZE: "1", SIGIL_LOG_LEVEL: "warn", SIGIL_SIGNUP_CREDIT_CENTS: "1000" },
    });
    [one, two] = cluster.instances.map((x) => x.url);
    const a = await call(one, "POST", "/core/v1/new_account", undefined, { account_name: "pins" });
    expect(a.status, JSON.stringify(a.body)).to.equal(201);
    key = a.body.api_key as string;
    await eventually(async () => (await call(two, "GET", "/core/v1/account", key)).status === 200, {
      what: "instance 2 to know the account",
      timeoutMs: 20_000,
    });
  });
  after(async function () {
    await cluster?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("pinned through instance 1: instance 2 answers its code by CID and runs it by CID", async () => {
    const code = `async function main({ n }) { return { twice: n * 2, tag: "${dir}" }; }`;
    const pinned = await call(one, "POST", "/core/v1/actions", key, { code });
    expect(pinned.status, JSON.stringify(pinned.body)).to.equal(201);
    const cid = pinned.body.cid as string;
    const group = await call(one, "POST", "/core/v1/groups", key, { name: "g", actions: [cid] });
    expect(group.status, JSON.stringify(group.body)).to.equal(201);
    // Only instance 1 received the bytes: instance 2's content store has never seen them.
    const storeOf = (id: string) => path.join(dir, "instances", id, "relayer", "actions", cid);
    expect(fs.existsSync(storeOf("instance-2"))).to.equal(false);

    const read = await call(two, "GET", `/core/v1/actions/${cid}`, key);
    expect(read.status, JSON.stringify(read.body)).to.equal(200);
    expect(read.body.code).to.equal(code);
    // The group reaches instance 2 through the chain; the code through the database.
    const run = await eventually(
      async () => {
        const r = await call(two, "POST", "/core/v1/svc_action", key, { cid, js_params: { n: 21 } });
        return r.status === 403 ? undefined : r;
      },
      { what: "instance 2 to run the action", timeoutMs: 20_000 },
    );
    expect(run.status, JSON.stringify(run.body)).to.equal(200);
    expect(run.body.response).to.deep.equal({ twice: 42, tag: dir });
  });

  it("a CID no instance pinned is still 404 action_not_found everywhere", async () => {
    const unknown = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG";
    for (const url of [one, two]) {
      const r = await call(url, "GET", `/core/v1/actions/${unknown}`, key);
      expect([r.status, (r.body.error as Json)?.code]).to.deep.equal([404, "action_not_found"]);
    }
  });
});
