#!/usr/bin/env -S npx ts-node --transpile-only
/**
 * `safe`: path B for Sigil with Safe multisigs. Thin layer over ./lib (which the tests call directly).
 *
 *   npm run safe -- deploy-suite --key $DEPLOYER
 *   npm run safe -- create-safe --owners A,B,C --threshold 2 --key $DEPLOYER
 *   npm run safe -- propose remove-key --key-address 0x… --safe $SAFE --out p.json
 *   npm run safe -- sign p.json --key $OWNER_1     (each owner, passing the file on)
 *   npm run safe -- status p.json
 *   npm run safe -- execute p.json --key $ANY_FUNDED_KEY
 *   npm run safe -- group 1 2              (a group's name, PKPs and CIDs, from the registry's logs)
 *
 * Private keys come from --key or the SIGIL_SAFE_KEY environment variable (keeps them out of shell history).
 */
import { Command } from "commander";
import {
  SafeCliError,
  chainIdAt,
  createSafe,
  deployBlockFrom,
  defaultDataDir,
  defaultDeploymentsFile,
  defaultRpcUrl,
  encodeRegistryCall,
  ensureSafeSuite,
  executeProposal,
  generateUsageKey,
  jsonSafe,
  proposalStatus,
  propose,
  readGroup,
  readProposal,
  requireSuite,
  resolveRegistryAddress,
  rpcProvider,
  signProposal,
  walletFromKey,
  writeProposal,
  type RegistryOp,
  type SafeContext,
  type ScopeFields,
} from "./lib";

interface GlobalOpts {
  rpc: string;
  dataDir: string;
  deployments?: string;
  json?: boolean;
}

const program = new Command("safe")
  .description("Sigil path B: manage an account's registry through a Safe multisig")
  .option("--rpc <url>", "JSON-RPC URL", defaultRpcUrl())
  .option("--data-dir <dir>", "Sigil data dir (deployment files)", defaultDataDir())
  .option("--deployments <file>", "Safe suite addresses file (default <data-dir>/safe-deployments.json)")
  .option("--json", "print machine-readable JSON");

function globals(): GlobalOpts {
  return program.opts<GlobalOpts>();
}

function keyFrom(opts: { key?: string }): string {
  const key = opts.key ?? process.env.SIGIL_SAFE_KEY;
  if (!key) throw new SafeCliError("invalid_argument", "a private key is required: --key or SIGIL_SAFE_KEY");
  return key;
}

async function context(): Promise<SafeContext> {
  const g = globals();
  const chainId = await chainIdAt(g.rpc);
  return {
    rpcUrl: g.rpc,
    chainId,
    suite: requireSuite(g.deployments ?? defaultDeploymentsFile(g.dataDir), chainId),
  };
}

function print(human: string, data: unknown): void {
  console.log(globals().json ? JSON.stringify(jsonSafe(data), null, 2) : human);
}

function parseJsonArgs(text: string): unknown[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new SafeCliError("invalid_argument", `--args is not JSON: ${text}`);
  }
  if (!Array.isArray(parsed))
    throw new SafeCliError("invalid_argument", "--args must be a JSON array of the function's arguments");
  return parsed;
}

const ids = (v: string): string[] => (v === "" ? [] : v.split(",").map((s) => s.trim()));

program
  .command("deploy-suite")
  .description("deploy the Safe 1.4.1 contracts on this chain unless the recorded ones are still there")
  .option("--key <hex>", "deployer private key")
  .action(async (opts) => {
    const g = globals();
    const file = g.deployments ?? defaultDeploymentsFile(g.dataDir);
    const wallet = walletFromKey(keyFrom(opts), rpcProvider(g.rpc));
    await chainIdAt(g.rpc); // a clear error if nothing answers there
    const { suite, deployed, chainId } = await ensureSafeSuite(wallet, file);
    print(`${deployed ? "deployed" : "already deployed"} on chain ${chainId}; recorded in ${file}`, {
      chainId,
      deployed,
      file,
      suite,
    });
  });

program
  .command("create-safe")
  .description("deploy a Safe with the given owners and threshold")
  .requiredOption("--owners <addresses>", "comma-separated owner addresses")
  .requiredOption("--threshold <n>", "signatures required", (v) => Number(v))
  .option("--salt <n>", "salt nonce (default: random)")
  .option("--key <hex>", "private key paying for the deployment")
  .action(async (opts) => {
    const safe = await createSafe(await context(), keyFrom(opts), {
      owners: ids(opts.owners),
      threshold: opts.threshold,
      saltNonce: opts.salt,
    });
    print(safe, { safe });
  });

/** Options every `propose` sub-command shares. */
function proposeCommand(name: string, description: string): Command {
  return new Command(name)
    .description(description)
    .requiredOption("--safe <address>", "the Safe that owns the account")
    .option(
      "--registry <address>",
      "AccountRegistry address (default: SIGIL_REGISTRY_ADDRESS or the data dir's deployment file)",
    )
    .requiredOption("--out <file>", "where to write the proposal")
    .option("--nonce <n>", "Safe nonce (default: the Safe's current nonce)", (v) => Number(v))
    .option("--sign-key <hex>", "also sign as this owner right away");
}

function scopeOptions(cmd: Command): Command {
  return cmd
    .option("--can-create-groups", "group:create")
    .option("--can-delete-groups", "group:delete")
    .option("--can-create-pkps", "pkp:create")
    .option("--manage-actions-in <ids>", "group:manageActions on these group ids (0 = all)", ids)
    .option("--add-pkp-to <ids>", "group:addPkp on these group ids (0 = all)", ids)
    .option("--remove-pkp-from <ids>", "group:removePkp on these group ids (0 = all)", ids)
    .option("--execute-in <ids>", "execute on these group ids (0 = all)", ids)
    .option("--name <name>", "label", "")
    .option("--description <text>", "description", "")
    .option("--expiration <unix>", "unix time after which the key is absent (0 = never)", "0");
}

function scopesFrom(o: Record<string, unknown>): ScopeFields {
  return {
    can_create_groups: o.canCreateGroups === true,
    can_delete_groups: o.canDeleteGroups === true,
    can_create_pkps: o.canCreatePkps === true,
    manage_ipfs_ids_in_groups: (o.manageActionsIn as string[]) ?? [],
    add_pkp_to_groups: (o.addPkpTo as string[]) ?? [],
    remove_pkp_from_groups: (o.removePkpFrom as string[]) ?? [],
    execute_in_groups: (o.executeIn as string[]) ?? [],
  };
}

/** Exactly one of --cid and --clear: a forgotten --cid must not clear a group's policy by accident. */
function policyCidFrom(o: Record<string, unknown>): string {
  const cid = typeof o.cid === "string" ? o.cid : undefined;
  if ((cid === undefined) === (o.clear !== true))
    throw new SafeCliError("invalid_argument", "give exactly one of --cid <cid> and --clear");
  if (cid === "")
    throw new SafeCliError("invalid_argument", "--cid is empty; use --clear to remove the policy");
  return cid ?? "";
}

// commander hands options over untyped; each builder below reads the ones its command declares.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type CommandOpts = Record<string, any>;
type OpBuilder = (o: CommandOpts) => RegistryOp;

const proposals: [Command, OpBuilder][] = [
  [
    scopeOptions(
      proposeCommand("add-key", "register a usage key with scopes")
        .requiredOption("--key-address <address>", "the key's address")
        .option("--key-hash <bytes32>", "keccak256 of the key string"),
    ),
    (o) => ({
      op: "add-key",
      key: o.keyAddress,
      keyHash: o.keyHash,
      name: o.name,
      description: o.description,
      expiration: o.expiration,
      scopes: scopesFrom(o),
    }),
  ],
  [
    scopeOptions(
      proposeCommand("update-key", "replace a key's scopes and metadata").requiredOption(
        "--key-address <address>",
        "the key's address",
      ),
    ),
    (o) => ({
      op: "update-key",
      key: o.keyAddress,
      name: o.name,
      description: o.description,
      expiration: o.expiration,
      scopes: scopesFrom(o),
    }),
  ],
  [
    proposeCommand("remove-key", "revoke a usage key").requiredOption(
      "--key-address <address>",
      "the key's address",
    ),
    (o) => ({ op: "remove-key", key: o.keyAddress }),
  ],
  [
    proposeCommand("create-group", "create a group")
      .option("--name <name>", "label", "")
      .option("--description <text>", "description", "")
      .option("--pkps <ids>", "initial PKP ids", ids)
      .option("--cids <cids>", "initial action CIDs", ids),
    (o) => ({ op: "create-group", name: o.name, description: o.description, pkpIds: o.pkps, cids: o.cids }),
  ],
  [
    proposeCommand("delete-group", "delete a group").requiredOption("--group <id>", "group id"),
    (o) => ({ op: "delete-group", groupId: o.group }),
  ],
  [
    proposeCommand("add-action", "list an action CID in a group")
      .requiredOption("--group <id>", "group id")
      .requiredOption("--cid <cid>", "action CID"),
    (o) => ({ op: "add-action", groupId: o.group, cid: o.cid }),
  ],
  [
    proposeCommand("remove-action", "remove an action CID from a group")
      .requiredOption("--group <id>", "group id")
      .requiredOption("--cid <cid>", "action CID"),
    (o) => ({ op: "remove-action", groupId: o.group, cid: o.cid }),
  ],
  [
    proposeCommand("set-group-policy", "set a group's signing policy, or clear it with --clear")
      .requiredOption("--group <id>", "group id")
      .option("--cid <cid>", "CID of the policy document")
      .option("--clear", "remove the group's policy"),
    (o) => ({ op: "set-group-policy", groupId: o.group, cid: policyCidFrom(o) }),
  ],
  [
    proposeCommand("add-pkp", "add a PKP to a group")
      .requiredOption("--group <id>", "group id")
      .requiredOption("--pkp <id>", "PKP id (bytes32)"),
    (o) => ({ op: "add-pkp", groupId: o.group, pkpId: o.pkp }),
  ],
  [
    proposeCommand("remove-pkp", "remove a PKP from a group")
      .requiredOption("--group <id>", "group id")
      .requiredOption("--pkp <id>", "PKP id (bytes32)"),
    (o) => ({ op: "remove-pkp", groupId: o.group, pkpId: o.pkp }),
  ],
  [
    proposeCommand("create-pkp", "register a new PKP")
      .option("--name <name>", "label", "")
      .option("--description <text>", "description", ""),
    (o) => ({ op: "create-pkp", name: o.name, description: o.description }),
  ],
  [
    proposeCommand("accept-ownership", "accept a pending ownership transfer to this Safe").requiredOption(
      "--account <id>",
      "account id",
    ),
    (o) => ({ op: "accept-ownership", accountId: o.account }),
  ],
  [
    proposeCommand("transfer-ownership", "propose a new owner for the Safe's account").requiredOption(
      "--to <address>",
      "new owner",
    ),
    (o) => ({ op: "transfer-ownership", newOwner: o.to }),
  ],
  [
    proposeCommand("cancel-ownership-transfer", "withdraw a pending transfer"),
    () => ({ op: "cancel-ownership-transfer" }),
  ],
  [
    proposeCommand("call", "any other registry write")
      .requiredOption("--method <name>", "function name")
      .option("--args <json>", "JSON array of arguments", "[]"),
    (o) => ({ op: "call", method: o.method, args: parseJsonArgs(o.args) }),
  ],
];

program
  .command("new-key")
  .description(
    "make a usage key locally (raw private key); print it once with its address and hash for add-key",
  )
  .action(() => {
    const k = generateUsageKey();
    print(
      [
        `usage key (shown once; give it to the service that will use it): ${k.usageApiKey}`,
        `address (--key-address):  ${k.address}`,
        `hash (--key-hash):        ${k.keyHash}`,
      ].join("\n"),
      { usage_api_key: k.usageApiKey, address: k.address, key_hash: k.keyHash },
    );
  });

const proposeGroup = program
  .command("propose")
  .description("write a registry call as a Safe transaction proposal file");
for (const [cmd, build] of proposals) {
  cmd.action(async (o: CommandOpts) => {
    // Bad arguments are reported before anything touches the network.
    const call = encodeRegistryCall(build(o));
    const registry = resolveRegistryAddress(o.registry, globals().dataDir);
    const ctx = await context();
    let p = await propose(ctx, {
      safe: o.safe,
      to: registry,
      data: call.data,
      call: { method: call.method, args: jsonSafe(call.args) as unknown[] },
      nonce: o.nonce,
    });
    if (o.signKey) p = await signProposal(ctx, p, o.signKey);
    writeProposal(o.out, p);
    print(`proposal ${p.safeTxHash} (${call.method}, Safe nonce ${p.tx.nonce}) written to ${o.out}`, p);
  });
  proposeGroup.addCommand(cmd);
}

program
  .command("sign <file>")
  .description("sign a proposal as one owner; the signature is appended to the file")
  .option("--key <hex>", "owner private key")
  .option("--safe <address>", "refuse unless the proposal is for this Safe")
  .action(async (file: string, opts) => {
    const p = await signProposal(await context(), readProposal(file), keyFrom(opts), opts.safe);
    writeProposal(file, p);
    print(
      `signed by ${p.signatures[p.signatures.length - 1].signer} (${p.signatures.length} signature(s) in the file)`,
      p,
    );
  });

program
  .command("status <file>")
  .description("signatures collected against the Safe's threshold")
  .option("--safe <address>", "refuse unless the proposal is for this Safe")
  .action(async (file: string, opts) => {
    const s = await proposalStatus(await context(), readProposal(file), opts.safe);
    const lines = [
      `${s.description} on Safe ${s.safe} (nonce ${s.nonce}, Safe at ${s.safeNonce})`,
      `state: ${s.state}${s.executedIn ? ` in ${s.executedIn}` : ""}`,
      `signatures: ${s.collected} of ${s.threshold}`,
      ...s.signatures.map(
        (x) => `  ${x.signer} ${x.valid ? "valid" : "INVALID"}${x.owner ? "" : " (not an owner)"}`,
      ),
    ];
    print(lines.join("\n"), s);
  });

program
  .command("execute <file>")
  .description("execute a fully signed proposal")
  .option("--key <hex>", "private key paying for gas (need not be an owner)")
  .option("--safe <address>", "refuse unless the proposal is for this Safe")
  .action(async (file: string, opts) => {
    const r = await executeProposal(await context(), readProposal(file), keyFrom(opts), opts.safe);
    print(`executed in ${r.txHash} (block ${r.blockNumber})`, r);
  });

program
  .command("group <accountId> <groupId>")
  .description("a group's name, description, PKPs and action CIDs, rebuilt from the registry's logs")
  .option("--registry <address>", "registry address (default: SIGIL_REGISTRY_ADDRESS or the data dir)")
  .option("--from-block <n>", "first block to scan (default: the data dir's deployBlock, else 0)")
  .action(async (accountId: string, groupId: string, opts) => {
    const g = globals();
    const id = (v: string, what: string) => {
      if (!/^[1-9][0-9]{0,18}$/.test(v))
        throw new SafeCliError("invalid_argument", `${what} is not an id: ${v}`);
      return Number(v);
    };
    const fromBlock =
      opts.fromBlock === undefined ? deployBlockFrom(g.dataDir) : id(opts.fromBlock, "--from-block");
    const group = await readGroup(
      rpcProvider(g.rpc),
      resolveRegistryAddress(opts.registry, g.dataDir),
      id(accountId, "accountId"),
      id(groupId, "groupId"),
      fromBlock,
    );
    const lines = [
      `group ${group.groupId} of account ${group.accountId}: ${group.name}${group.description ? ` (${group.description})` : ""}`,
      `PKPs (${group.pkps.length}):`,
      ...group.pkps.map((p) => `  ${p.id}${p.name ? `  ${p.name}` : ""}`),
      `actions (${group.actions.length}):`,
      ...group.actions.map((a) => `  ${a.cid}`),
    ];
    print(lines.join("\n"), group);
  });

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof SafeCliError) {
    if (globals().json)
      console.error(
        JSON.stringify({ error: { code: err.code, message: err.message, details: jsonSafe(err.details) } }),
      );
    else console.error(`error [${err.code}]: ${err.message}`);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});
