/**
 * `npm run migrate:registry` on a real data folder made with the layout-2 registry (its real bytecode,
 * test/fixtures), populated as the old service did (the account's writes signed in the enclave with the
 * account key, through the forwarder), run as a child process; then the service started on the folder and
 * read through the HTTP API.
 */
import { expect } from "chai";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { Contract, ethers, Wallet, ZeroAddress } from "ethers";
import { computeCid } from "../../enclave";
import { loadConfig } from "../../scripts/start/config";
import { MigrationProgress } from "../../scripts/migrate/progress";
import { startSigil, type RunningSigil } from "../../scripts/start/service";
import { AccountRegistry__factory } from "../../typechain-types";
import { startLayout2Folder } from "../helpers/layout2Folder";

const ROOT = path.resolve(__dirname, "..", "..");
const ROOT_KEY = "2a".repeat(32);
/** anvil's second dev account: the wallet that owns the ChainSecured account. */
const WALLET_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const ACTION = `async function main({ pkpId, message }) {
  const signature = await Actions.signMessage({ pkpId, message });
  return { message, signature, address: await Actions.getAddress({ pkpId }) };
}
`;
const MESSAGE = "signed before and after the migration";
const EXECUTE_ONLY = (groups: number[]) => ({
  canCreateGroups: false,
  canDeleteGroups: false,
  canCreatePkps: false,
  manageIpfsIdsInGroups: [],
  addPkpToGroups: [],
  removePkpFromGroups: [],
  executeInGroups: groups,
});

/** A PKP's id as the registry derives it (contracts/AccountRegistry.sol `_pkpId`). */
function pkpIdAfter(domain: string, accountId: bigint, index: bigint): string {
  return ethers.keccak256(
    ethers.AbiCoder.defaultAbiCoder().encode(
      ["uint256", "address", "uint64", "uint256"],
      [31337n, domain, accountId, index],
    ),
  );
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe("npm run migrate:registry (a layout-2 data folder onto the current registry)", function () {
  this.timeout(300_000);
  let dir: string;
  let dataDir: string;
  let anvilPort: number;
  let oldRegistry: string;
  let forwarderAddress: string;
  let cid: string;
  const accountKey = { api: "", second: "" };
  const usageKey = { api: "", wallet: "" };
  const pkps: { id: string; address: string; publicKey: string; name: string }[] = [];
  let expectedSignature: string;
  /** The address the first account's next PKP must get: its id is bound to the old registry's domain. */
  let nextPkpAddress: string;
  /** The resumed run, whose summary a later test reads. */
  let lastRun: Run;
  const deploymentFile = () => path.join(dataDir, "deployment.json");
  const migrationFile = () => path.join(dataDir, "migration.json");

  const env = () => ({
    ...process.env,
    SIGIL_DATA_DIR: dataDir,
    SIGIL_ANVIL_PORT: String(anvilPort),
    SIGIL_ROOT_KEY: ROOT_KEY,
    SIGIL_LOG_FILE: path.join(dir, "sigil.log"),
    PORT: "0",
  });

  /** The command as a child process; `onStderr` may interrupt it. */
  function migrate(args: string[] = [], onStderr?: (all: string, child: ReturnType<typeof spawn>) => void) {
    return new Promise<Run>((resolve) => {
      const child = spawn(
        process.execPath,
        [require.resolve("ts-node/dist/bin"), "--transpile-only", "scripts/migrate/cli.ts", ...args],
        { cwd: ROOT, env: env(), stdio: ["ignore", "pipe", "pipe"] },
      );
      let stdout = "";
      let stderr = "";
      child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr!.on("data", (d: Buffer) => {
        stderr += d.toString();
        onStderr?.(stderr, child);
      });
      child.on("exit", (code) => resolve({ code, stdout, stderr }));
    });
  }

  /** Builds the data folder the previous release's `npm start` left: chain state, deployment.json. */
  before(async () => {
    const folder = await startLayout2Folder("sigil-migrate-", ROOT_KEY);
    ({ dir, dataDir, anvilPort, oldRegistry, forwarderAddress } = folder);
    const { provider, old, enclave, asAccount } = folder;
    try {
      cid = await computeCid(Buffer.from(ACTION));
      const api = enclave.generateAccountKey();
      accountKey.api = api.apiKey;
      await asAccount(api.apiKey, "createAccount", ["api account", api.address]);
      await asAccount(api.apiKey, "createPkp", ["signer", "signs messages"]);
      await asAccount(api.apiKey, "createPkp", ["spare", ""]);
      const [signer, spare] = ((await old.listPkps(1n, 0n, 10n))[0] as { id: string }[]).map((p) => p.id);
      await asAccount(api.apiKey, "createGroup", ["demo", "the README's group", [signer, spare], [cid]]);
      const usage = enclave.generateUsageKey();
      usageKey.api = usage.apiKey;
      await asAccount(api.apiKey, "addKey", [
        usage.address,
        usage.keyHash,
        "server",
        "",
        0n,
        EXECUTE_ONLY([1]),
      ]);

      const second = enclave.generateAccountKey();
      accountKey.second = second.apiKey;
      await asAccount(second.apiKey, "createAccount", ["second api account", second.address]);
      await asAccount(second.apiKey, "createPkp", ["its own", ""]);

      // ChainSecured: owned by a wallet that writes on chain itself (path B).
      const owner = old.connect(new ethers.NonceManager(new Wallet(WALLET_KEY, provider))) as Contract;
      await (await owner.createAccount("wallet account", ZeroAddress)).wait();
      await (await owner.createPkp("wallet pkp", "")).wait();
      const walletUsage = enclave.generateUsageKey();
      usageKey.wallet = walletUsage.apiKey;
      await (
        await owner.addKey(walletUsage.address, walletUsage.keyHash, "reader", "", 0n, EXECUTE_ONLY([]))
      ).wait();

      for (const account of [1n, 2n, 3n])
        for (const p of (await old.listPkps(account, 0n, 10n))[0] as { id: string; name: string }[])
          pkps.push({
            id: p.id,
            name: p.name,
            address: enclave.pkpAddress(p.id),
            publicKey: enclave.pkpPublicKey(p.id),
          });
      expectedSignature = enclave.pkpSignMessage(signer, MESSAGE);
      nextPkpAddress = enclave.pkpAddress(pkpIdAfter(oldRegistry, 1n, 3n));
      folder.writeDeployment();
    } finally {
      await folder.stopChain();
    }
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("npm start refuses the folder with registry_outdated, naming the command", async () => {
    const refusal = await startSigil(loadConfig(env(), dir)).then(
      async (s) => {
        await s.close();
        return { code: "started" };
      },
      (e: Error & { code?: string }) => ({
        code: e.code,
        names: e.message.includes("`npm run migrate:registry`"),
      }),
    );
    expect(refusal).to.deep.equal({ code: "registry_outdated", names: true });
  });

  it("--dry-run lists each account's plan and writes nothing", async () => {
    const before = fs.readFileSync(deploymentFile(), "utf8");
    const run = await migrate(["--dry-run"]);
    expect([run.code, run.stdout.split("\n").slice(1, 5), fs.existsSync(migrationFile())]).to.deep.equal([
      0,
      [
        "  account 1: 8 writes, written by its service-managed owner",
        "  account 2: 2 writes, written by its service-managed owner",
        `  account 3: 3 writes, rebuilt by a temporary owner, then ${new Wallet(WALLET_KEY).address} must call acceptOwnership(3)`,
        "Nothing was written (--dry-run).",
      ],
      false,
    ]);
    expect(fs.readFileSync(deploymentFile(), "utf8")).to.equal(before);
  });

  it("interrupted after the first account (SIGINT), keeps deployment.json and records the half-done registry", async () => {
    const before = fs.readFileSync(deploymentFile(), "utf8");
    let sent = false;
    const run = await migrate([], (stderr, child) => {
      if (!sent && /account 1 done/.test(stderr)) {
        sent = true;
        child.kill("SIGINT");
      }
    });
    const record = JSON.parse(fs.readFileSync(migrationFile(), "utf8")) as {
      from_registry: string;
      state: { done: string[] };
    };
    expect([
      run.code,
      record.from_registry,
      record.state.done.includes("1"),
      record.state.done.length < 3,
    ]).to.deep.equal([130, oldRegistry, true, true]);
    expect(fs.readFileSync(deploymentFile(), "utf8")).to.equal(before);
  });

  it("run again, resumes where it stopped and points deployment.json at the new registry", async () => {
    const recorded = JSON.parse(fs.readFileSync(migrationFile(), "utf8")) as { to_registry: string };
    const run = await migrate();
    lastRun = run;
    const deployment = JSON.parse(fs.readFileSync(deploymentFile(), "utf8")) as Record<string, unknown>;
    expect([
      run.code,
      /account 1 already migrated \(earlier run\), 1\/3/.test(run.stderr),
      /account 3 done: \d+ writes, 3\/3/.test(run.stderr),
      deployment.registry,
      deployment.previous_registry,
      deployment.forwarder,
    ]).to.deep.equal([0, true, true, recorded.to_registry, oldRegistry, forwarderAddress]);
  });

  it("tells which owner must accept which account on the new registry", async () => {
    const recorded = JSON.parse(fs.readFileSync(migrationFile(), "utf8")) as {
      to_registry: string;
      replay_end_block: number;
    };
    expect(lastRun.stdout.split("\n").slice(1)).to.deep.equal([
      `Webhooks: the copies are not announced; events of the new registry are sent from block ${recorded.replay_end_block + 1} on.`,
      `  account 3: its owner ${new Wallet(WALLET_KEY).address} must call acceptOwnership(3) on ${recorded.to_registry}`,
      "Start the service with npm start.",
      "",
    ]);
  });

  it("a second run on the migrated folder says it is already current and changes nothing", async () => {
    const files = () => [fs.readFileSync(deploymentFile(), "utf8"), fs.readFileSync(migrationFile(), "utf8")];
    const before = files();
    const run = await migrate();
    expect([run.code, run.stdout]).to.deep.equal([
      0,
      `The data folder is already current: its registry ${JSON.parse(before[0]).registry} has layout 3 (migrated from ${oldRegistry}). Nothing to do.\n`,
    ]);
    expect(files()).to.deep.equal(before);
  });

  describe("the service started on the migrated folder", function () {
    let sigil: RunningSigil;
    const http = async (method: string, route: string, key: string, body?: unknown, bearer = false) => {
      const res = await fetch(`${sigil.url}/core/v1/${route}`, {
        method,
        headers: {
          "content-type": "application/json",
          ...(bearer ? { authorization: `Bearer ${key}` } : { "x-api-key": key }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };

    before(async () => {
      sigil = await startSigil(loadConfig(env(), dir));
      // The ledger is not the migration's business (account ids stay); this folder never had one, so the
      // account buys credit for the execution with a simulated payment, as `npx sigil billing top-up` does.
      const created = await http("POST", "billing/create_payment_intent", accountKey.api, {
        amount_cents: 500,
      });
      const intent = created.json as { payment_intent_id: string };
      expect(created.status, JSON.stringify(created.json)).to.be.oneOf([200, 201]);
      await http("POST", `billing/simulated/intents/${intent.payment_intent_id}/succeed`, accountKey.api);
      const paid = await http("POST", "billing/confirm_payment", accountKey.api, {
        payment_intent_id: intent.payment_intent_id,
      });
      expect(paid.status, JSON.stringify(paid.json)).to.equal(200);
    });
    after(async () => {
      await sigil?.close();
    });

    it("serves every PKP with the same id, name, address and public key", async () => {
      const listed = [];
      for (const key of [accountKey.api, accountKey.second, usageKey.wallet]) {
        const res = await http("GET", "pkps", key, undefined, key === usageKey.wallet);
        for (const p of res.json.items as Record<string, string>[]) {
          const one = await http("GET", `pkps/${p.pkp_id}`, key);
          listed.push({
            id: p.pkp_id,
            name: p.name,
            address: ethers.getAddress(String(one.json.address)),
            publicKey: one.json.public_key,
          });
        }
      }
      expect(listed).to.deep.equal(pkps);
    });

    it("keeps the API-mode accounts in API mode: the account key still writes, with the next PKP id", async () => {
      const modes = [];
      for (const key of [accountKey.api, accountKey.second])
        modes.push((await http("GET", "account", key)).json.mode);
      const created = await http("POST", "pkps/create", accountKey.api, { name: "after the migration" });
      expect([
        modes,
        created.status,
        created.json.address === undefined ? created.json : ethers.getAddress(String(created.json.address)),
      ]).to.deep.equal([["api", "api"], 201, nextPkpAddress]);
    });

    it("reads the group with the same name, description, PKPs and action", async () => {
      const res = await http("GET", "groups/1", accountKey.api);
      const g = res.json as { name: string; description: string; pkps: unknown[]; actions: unknown[] };
      expect([g.name, g.description, g.pkps, g.actions]).to.deep.equal([
        "demo",
        "the README's group",
        pkps.slice(0, 2).map((p) => p.id),
        [cid],
      ]);
    });

    it("lets the usage key execute the action with the same result as before", async () => {
      const signer = pkps[0];
      const res = await http(
        "POST",
        "svc_action",
        usageKey.api,
        { code: ACTION, pkp_id: signer.id, js_params: { pkpId: signer.id, message: MESSAGE } },
        true,
      );
      expect([res.status, res.json.response]).to.deep.equal([
        200,
        { message: MESSAGE, signature: expectedSignature, address: signer.address },
      ]);
    });

    it("shows the wallet's account pending acceptOwnership by its owner, and ChainSecured by it once accepted", async () => {
      const walletAddress = new Wallet(WALLET_KEY).address;
      const pending = (await http("GET", "account", usageKey.wallet, undefined, true)).json;
      const registry = AccountRegistry__factory.connect(
        sigil.deployment.registry,
        new ethers.NonceManager(new Wallet(WALLET_KEY, new ethers.JsonRpcProvider(sigil.rpcUrl))),
      );
      await (await registry.acceptOwnership(3n)).wait();
      let accepted = pending;
      for (let i = 0; i < 50 && accepted.owner_address !== walletAddress; i++) {
        await new Promise((r) => setTimeout(r, 200));
        accepted = (await http("GET", "account", usageKey.wallet, undefined, true)).json;
      }
      expect([
        pending.mode,
        pending.pending_owner,
        pending.owner_address === walletAddress,
        accepted.mode,
        accepted.owner_address,
        accepted.pending_owner,
      ]).to.deep.equal(["chain_secured", walletAddress, false, "chain_secured", walletAddress, null]);
    });
  });
});

describe("migrate:registry progress on stderr (scripts/migrate/progress.ts)", function () {
  const record = (isTTY: boolean) => {
    const written: string[] = [];
    const progress = new MigrationProgress({ isTTY, columns: 60, write: (t) => written.push(t) }, 2);
    progress.skipped(1n);
    progress.starting(2n);
    progress.finished(2n, 5);
    progress.end();
    return written;
  };

  it("draws a bar in place on a terminal, cut to the width: done / total and the current account", () => {
    expect(record(true).map((w) => w.trimEnd())).to.deep.equal([
      "\r[###############...............] 1/2 accounts · account 1 a",
      "\r[###############...............] 1/2 accounts · account 2",
      "\r[##############################] 2/2 accounts · account 2 d",
      "",
    ]);
  });

  it("writes plain lines when stderr is not a terminal", () => {
    expect(record(false)).to.deep.equal([
      "account 1 already migrated (earlier run), 1/2\n",
      "migrating account 2 (1/2 done)\n",
      "account 2 done: 5 writes, 2/2\n",
    ]);
  });
});
