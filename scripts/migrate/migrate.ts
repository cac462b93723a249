/**
 * Rebuilds every account of an old registry in a new one that continues its PKP id domain
 * (deploySigil(signer, { continues })), account by account in id order, and checks each on chain before
 * the next (scripts/migrate/verify.ts).
 *
 * Who writes: every write of an account is a forward request signed by its acting owner and carried by
 * `executeBatch` (the payer pays; the owners need no gas). The acting owner is the account's owner when
 * `ownerSigner` can sign for it (API-mode accounts: the service-managed owner, derived by the enclave);
 * otherwise (a wallet or a Safe owns the account) a fresh key kept in the migration state rebuilds it and
 * then proposes the real owner with `transferOwnership`, who only has to call `acceptOwnership(accountId)`.
 *
 * Resumable: the state (`MigrationState`, saved through `save` after every change) records the accounts
 * done, the temporary owners' keys and each acting owner's forwarder nonce before its first write; an
 * interrupted account resumes at the write its acting owner's nonce has reached (each write uses exactly
 * one nonce, and a batch is atomic). Run it while no one else writes to the new registry.
 */
import { Interface, Wallet, ZeroAddress, type Provider, type Signer, type TypedDataDomain } from "ethers";
import { AccountRegistry__factory, SigilForwarder__factory } from "../../typechain-types";
import { planAccount, type AccountPlan, type OldRegistry, type Write } from "./plan";
import { verifyAccount } from "./verify";

/** Signs EIP-712 forward requests as one address (a Wallet, or the enclave signing as an owner). */
export interface RequestSigner {
  address: string;
  signRequest(domain: TypedDataDomain, request: ForwardRequest): Promise<string>;
}

export interface ForwardRequest {
  from: string;
  to: string;
  value: bigint;
  gas: bigint;
  nonce: bigint;
  deadline: bigint;
  data: string;
}

export const FORWARD_REQUEST_TYPES = {
  ForwardRequest: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "gas", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint48" },
    { name: "data", type: "bytes" },
  ],
};

export function walletRequestSigner(wallet: Wallet): RequestSigner {
  return {
    address: wallet.address,
    signRequest: (domain, request) => wallet.signTypedData(domain, FORWARD_REQUEST_TYPES, request),
  };
}

export interface MigrationState {
  /** Accounts rebuilt and checked, as decimal strings. */
  done: string[];
  /** Temporary owners' private keys by account id (secret: whoever holds one owns the account until handover). */
  temporaryOwners: Record<string, string>;
  /** The acting owner's forwarder nonce before the account's first write, by account id. */
  startNonces: Record<string, string>;
}

export const emptyState = (): MigrationState => ({ done: [], temporaryOwners: {}, startNonces: {} });

export interface AccountOutcome {
  accountId: bigint;
  writes: number;
  /** Set when a temporary owner rebuilt the account: the owner who must call acceptOwnership. */
  awaitingAcceptance?: string;
  /** A transfer pending in the old registry that could not be carried over (the handover took its place). */
  droppedPendingOwner?: string;
  skippedKeys: AccountPlan["skippedKeys"];
}

export interface MigrationOptions {
  provider: Provider;
  /** Sends the batches and pays for them. */
  payer: Signer;
  old: OldRegistry;
  newRegistry: string;
  forwarder: string;
  /**
   * The signer of an owner address the service controls (API mode: derived from the account's master-key
   * address), or undefined.
   */
  ownerSigner(owner: string, masterKey: string): RequestSigner | undefined;
  state: MigrationState;
  save(state: MigrationState): void;
  /** Called before an account not yet done is rebuilt (a progress display names the current account). */
  starting?(accountId: bigint): void;
  /** Called after each account (done of total known so far is not known in advance: total = undefined). */
  progress?(accountId: bigint, outcome: AccountOutcome | "skipped"): void;
  /** Forward requests per executeBatch (default 32). */
  batchSize?: number;
}

const REQUEST_GAS = 2_000_000n;
const NO_DEADLINE = 2n ** 47n;

export async function migrateRegistry(options: MigrationOptions): Promise<AccountOutcome[]> {
  const { provider, state } = options;
  const forwarder = SigilForwarder__factory.connect(options.forwarder, options.payer);
  const registryInterface = new Interface(AccountRegistry__factory.abi);
  const { chainId } = await provider.getNetwork();
  const domain: TypedDataDomain = {
    name: "SigilForwarder",
    version: "1",
    chainId,
    verifyingContract: options.forwarder,
  };
  const outcomes: AccountOutcome[] = [];

  for (let accountId = 1n; ; accountId++) {
    const key = accountId.toString();
    const plan = await planAccount(provider, options.old, accountId);
    if (!plan) return outcomes;
    if (state.done.includes(key)) {
      options.progress?.(accountId, "skipped");
      continue;
    }

    options.starting?.(accountId);
    let actor = options.ownerSigner(plan.owner, plan.masterKey);
    const temporary = actor === undefined;
    if (!actor) {
      state.temporaryOwners[key] ??= Wallet.createRandom().privateKey;
      options.save(state);
      actor = walletRequestSigner(new Wallet(state.temporaryOwners[key]));
    }
    const writes: Write[] = [...plan.writes];
    let droppedPendingOwner: string | undefined;
    if (temporary) {
      writes.push({ fn: "transferOwnership", args: [plan.owner] });
      if (plan.pendingOwner !== ZeroAddress) droppedPendingOwner = plan.pendingOwner;
    } else if (plan.pendingOwner !== ZeroAddress) {
      writes.push({ fn: "transferOwnership", args: [plan.pendingOwner] });
    }

    if (state.startNonces[key] === undefined) {
      state.startNonces[key] = (await forwarder.nonces(actor.address)).toString();
      options.save(state);
    }
    const start = BigInt(state.startNonces[key]);
    let nonce = await forwarder.nonces(actor.address);
    const size = options.batchSize ?? 32;
    for (let next = Number(nonce - start); next < writes.length; next += size) {
      const requests = [];
      for (const write of writes.slice(next, next + size)) {
        const request: ForwardRequest = {
          from: actor.address,
          to: options.newRegistry,
          value: 0n,
          gas: REQUEST_GAS,
          nonce: nonce++,
          deadline: NO_DEADLINE,
          data: registryInterface.encodeFunctionData(write.fn, write.args),
        };
        const signature = await actor.signRequest(domain, request);
        // The forwarder takes the request without its nonce: it checks the signature against the current one.
        const { from, to, value, gas, deadline, data } = request;
        requests.push({ from, to, value, gas, deadline, data, signature });
      }
      // A zero refund receiver makes the batch atomic: a write that fails stops the migration here.
      await (await forwarder.executeBatch(requests, ZeroAddress)).wait();
    }

    const problems = await verifyAccount(provider, options.old, options.newRegistry, plan);
    if (problems.length)
      throw new Error(`account ${accountId} does not read the same after migration:\n${problems.join("\n")}`);
    state.done.push(key);
    options.save(state);
    const outcome: AccountOutcome = {
      accountId,
      writes: writes.length,
      skippedKeys: plan.skippedKeys,
      ...(temporary ? { awaitingAcceptance: plan.owner } : {}),
      ...(droppedPendingOwner ? { droppedPendingOwner } : {}),
    };
    outcomes.push(outcome);
    options.progress?.(accountId, outcome);
  }
}
