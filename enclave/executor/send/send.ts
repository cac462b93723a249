/**
 * `Actions.sendTransaction` on the enclave side (docs/actions.md, "EVM send"): fill, simulate, sign
 * through the run's signing policies, broadcast, and (when asked) wait for the receipt, all within the
 * run's time limit. The action never gets an RPC handle: it names a chain id, and the URL is the
 * operator's (relayer/chains.ts).
 *
 * Order and why:
 * 1. fees, then `eth_estimateGas` (which simulates: a revert is refused here with its reason, before
 *    any signature and at no gas cost), then the balance check (an unfunded PKP is told its address
 *    and the wei it needs). None of these depend on the nonce, so they run outside the nonce lock;
 * 2. under the (chain, PKP) nonce lock (nonces.ts): take the nonce, sign (the same policy check as
 *    `signTransaction`: a refused send never reaches `eth_sendRawTransaction`), broadcast;
 * 3. the wait for the receipt holds no lock and no key-operation slot.
 */
import { keccak256 } from "ethers";
import { SendError } from "./errors";
import { suggestFees, type Fees } from "./fees";
import { NonceManager, withNonceOutcome, type NonceSlot } from "./nonces";
import { decodeRevert } from "./revert";
import { normalize, readSendRequest, type Normalized } from "./request";
import { waitForReceipt, type SendReceipt } from "./receipt";
import { JsonRpcClient, RpcAnswerError, RpcUnreachableError } from "./rpc";

/** A chain the executor may send to: the structural half of the relayer's ChainEndpoint. */
export interface SendChain {
  chainId: number;
  rpcUrl: string;
}

/** What one send needs from the run that asked (the pool supplies it). */
export interface SendRun {
  /** performance.now() time by which the answer must be on its way back to the action. */
  deadline: number;
  /** False once the run has ended: a wait stops. */
  live: () => boolean;
  /** Called once the transaction is broadcast: what follows (the wait) holds no key-operation slot. */
  broadcastDone?: () => void;
}

/** The checked signature of a complete transaction (key-ops.ts), and how to give back its window use. */
export type SignChecked = (
  transaction: Record<string, unknown>,
) => Promise<{ raw: string; release: () => Promise<void> }>;

export type { SendReceipt };

export interface SendAnswer {
  hash: string;
  nonce: number;
  from: string;
  receipt?: SendReceipt;
}

export interface SendServiceOptions {
  /** Longest wait for one RPC answer (default 10 s; never past the run's time limit). */
  rpcTimeoutMs?: number;
  /** Pause between two receipt polls (default 100 ms). */
  pollMs?: number;
}

const INSUFFICIENT = /insufficient funds/i;
const NONCE_LOW = /nonce too low|nonce.*already.*used|oldnonce/i;
const ALREADY_KNOWN = /already known|already imported|known transaction/i;
const NONCE_HIGH = /nonce too high|nonce gap|future transaction/i;
const UNDERPRICED =
  /underpriced|fee cap|max fee per gas less than|less than block base fee|tip.*(higher|greater)/i;
const REVERTED = /revert|out of gas|invalid opcode|exceeds allowance|exceeds block gas limit/i;

export class SendService {
  private readonly chains = new Map<number, { chain: SendChain; rpc: JsonRpcClient }>();
  private readonly nonces = new NonceManager();
  private readonly pollMs: number;

  constructor(chains: readonly SendChain[], opts: SendServiceOptions = {}) {
    const timeout = opts.rpcTimeoutMs ?? 10_000;
    for (const c of chains)
      this.chains.set(c.chainId, { chain: c, rpc: new JsonRpcClient(c.rpcUrl, timeout) });
    this.pollMs = opts.pollMs ?? 100;
  }

  /** The configured chain ids, for errors and tests. */
  chainIds(): number[] {
    return [...this.chains.keys()];
  }

  async send(
    args: Record<string, unknown>,
    from: string,
    sign: SignChecked,
    run: SendRun,
  ): Promise<SendAnswer> {
    const req = readSendRequest(args);
    const entry = this.chains.get(req.chainId);
    if (entry === undefined) {
      const known = this.chainIds().join(", ") || "none";
      throw new SendError(
        "chain_not_configured",
        `chain ${req.chainId} is not configured on this service (configured: ${known}); the operator adds chains with SIGIL_CHAINS`,
        { chain_id: req.chainId },
      );
    }
    if (!/^https?:\/\//i.test(entry.chain.rpcUrl))
      // ws(s) URLs serve chain-event triggers; a send's requests are plain HTTP (rpc.ts).
      throw new SendError(
        "send_rpc_failed",
        `chain ${req.chainId}'s RPC URL is not http(s); sendTransaction needs an http(s) URL (SIGIL_CHAINS)`,
        { chain_id: req.chainId },
      );
    const rpc = entry.rpc;
    const within = () => {
      const left = run.deadline - performance.now();
      if (left <= 0)
        throw new SendError(
          "send_rpc_failed",
          "the run's time limit was reached before the transaction was sent",
        );
      return left;
    };
    const base = normalize(req);
    const fees = await this.fees(rpc, base, within);
    const gasLimit = await this.simulate(rpc, base, from, within);
    await this.checkFunds(rpc, base, fees, gasLimit, from, within);
    const { hash, nonce } = await this.nonces.withNonce(
      req.chainId,
      from,
      async () => Number(BigInt(await rpcCall(rpc, "eth_getTransactionCount", [from, "pending"], within()))),
      (slot) =>
        this.signAndBroadcast(
          rpc,
          req.chainId,
          from,
          { ...base.fields, ...feeFields(fees, base.fields.accessList !== undefined), gasLimit },
          slot,
          sign,
          within,
        ),
    );
    run.broadcastDone?.();
    if (req.confirmations === 0) return { hash, nonce, from };
    const receipt = await waitForReceipt(rpc, hash, req.confirmations, run, this.pollMs);
    if (receipt === null)
      throw new SendError(
        "send_wait_timeout",
        `transaction ${hash} was sent (nonce ${nonce}) but not confirmed before the run's time limit`,
        { hash, nonce, from },
      );
    return { hash, nonce, from, receipt };
  }

  private async fees(rpc: JsonRpcClient, base: Normalized, within: () => number): Promise<Fees> {
    const f = base.fees;
    if (f.gasPrice !== undefined) return { type: 0, gasPrice: f.gasPrice };
    if (base.legacy) {
      // The action asked for a type 0 or 1 transaction: a gas price, whatever the chain supports.
      try {
        return { type: 0, gasPrice: BigInt(await rpc.call<string>("eth_gasPrice", [], within())) };
      } catch (e) {
        throw rpcFailure("reading the gas price", e);
      }
    }
    if (f.maxFeePerGas !== undefined && f.maxPriorityFeePerGas !== undefined)
      return { type: 2, maxFeePerGas: f.maxFeePerGas, maxPriorityFeePerGas: f.maxPriorityFeePerGas };
    let suggested: Fees;
    try {
      suggested = await suggestFees(rpc, within());
    } catch (e) {
      throw rpcFailure("reading the fees", e);
    }
    if (suggested.type === 0) {
      if (f.maxFeePerGas !== undefined || f.maxPriorityFeePerGas !== undefined)
        throw {
          code: "invalid_argument",
          shortMessage: `sendTransaction: chain has no EIP-1559 fees; give gasPrice`,
        };
      return suggested;
    }
    const tip = f.maxPriorityFeePerGas ?? suggested.maxPriorityFeePerGas;
    const max = f.maxFeePerGas ?? suggested.maxFeePerGas - suggested.maxPriorityFeePerGas + tip;
    return { type: 2, maxFeePerGas: max, maxPriorityFeePerGas: tip < max ? tip : max };
  }

  /** eth_estimateGas, which runs the call: a revert is refused here, before any signature. */
  private async simulate(
    rpc: JsonRpcClient,
    base: Normalized,
    from: string,
    within: () => number,
  ): Promise<bigint> {
    const call: Record<string, unknown> = { from, value: hexQ(base.value), data: base.data };
    if (base.to !== null) call.to = base.to;
    if (base.fields.accessList !== undefined) call.accessList = base.fields.accessList;
    let estimate: bigint;
    try {
      estimate = BigInt(await rpc.call<string>("eth_estimateGas", [call], within()));
    } catch (e) {
      if (e instanceof RpcAnswerError && INSUFFICIENT.test(e.message))
        throw new SendError(
          "send_insufficient_funds",
          `the PKP ${from} cannot pay the value of ${base.value} wei; fund it with at least that plus gas`,
          { address: from, needed_wei: base.value.toString() },
        );
      if (
        e instanceof RpcAnswerError &&
        (e.data !== undefined || e.rpcCode === 3 || REVERTED.test(e.message))
      ) {
        const { reason, data } = decodeRevert(e.data, e.message);
        throw new SendError("send_reverted", `the transaction would revert: ${reason}; nothing was sent`, {
          reason,
          data,
        });
      }
      throw rpcFailure("simulating the transaction (eth_estimateGas)", e);
    }
    if (base.gasLimit !== undefined) return base.gasLimit;
    // Contract calls get a fifth more than the estimate: state can change between estimate and
    // inclusion, and unused gas is refunded. A plain transfer's 21000 is exact.
    return base.data === "0x" && estimate === 21_000n ? estimate : (estimate * 6n) / 5n;
  }

  private async checkFunds(
    rpc: JsonRpcClient,
    base: Normalized,
    fees: Fees,
    gasLimit: bigint,
    from: string,
    within: () => number,
  ): Promise<void> {
    let balance: bigint;
    try {
      balance = BigInt(await rpc.call<string>("eth_getBalance", [from, "pending"], within()));
    } catch (e) {
      throw rpcFailure("reading the PKP's balance", e);
    }
    const perGas = fees.type === 2 ? fees.maxFeePerGas : fees.gasPrice;
    const needed = base.value + gasLimit * perGas;
    if (balance < needed)
      throw new SendError(
        "send_insufficient_funds",
        `the PKP ${from} holds ${balance} wei and the transaction may cost up to ${needed} wei (value + gas × max fee); fund it`,
        { address: from, needed_wei: needed.toString(), balance_wei: balance.toString() },
      );
  }

  private async signAndBroadcast(
    rpc: JsonRpcClient,
    chainId: number,
    from: string,
    fields: Record<string, unknown>,
    slot: NonceSlot,
    sign: SignChecked,
    within: () => number,
  ): Promise<{ value: { hash: string; nonce: number }; outcome: "taken" }> {
    for (let attempt = 0; ; attempt++) {
      within();
      const nonce = slot.nonce;
      const { raw, release } = await sign({ ...fields, chainId, nonce });
      const hash = keccak256(raw);
      try {
        const answered = await rpc.call<string>("eth_sendRawTransaction", [raw], within());
        return { value: { hash: typeof answered === "string" ? answered : hash, nonce }, outcome: "taken" };
      } catch (e) {
        if (e instanceof RpcUnreachableError)
          // The node may have taken it: the nonce is re-read by the next send, the hash lets the action look.
          throw withNonceOutcome(
            new SendError(
              "send_rpc_failed",
              `the chain's RPC did not answer the broadcast (${e.message}); the transaction may or may not have been sent`,
              { hash, nonce },
            ),
            "unknown",
          );
        if (!(e instanceof RpcAnswerError)) throw e;
        await release().catch(() => undefined); // refused: no signature went out
        // This very transaction is already in the pool or mined (a broadcast the node had taken before
        // answering an error): it is sent, and must not be signed again under another nonce.
        if ((ALREADY_KNOWN.test(e.message) || NONCE_LOW.test(e.message)) && (await known(rpc, hash, within)))
          return { value: { hash, nonce }, outcome: "taken" };
        if (NONCE_LOW.test(e.message) || ALREADY_KNOWN.test(e.message)) {
          if (attempt === 0) {
            // Another sender (another instance, a wallet) used the PKP's nonces: re-read once, retry.
            await slot.resync().catch((err) => {
              throw withNonceOutcome(rpcFailure("re-reading the nonce", err), "unknown");
            });
            continue;
          }
          throw withNonceOutcome(
            new SendError(
              "send_nonce_gap",
              `nonce ${nonce} was refused twice (${e.message}): the PKP's nonces are being used elsewhere; retry`,
              { nonce },
            ),
            "unknown",
          );
        }
        if (NONCE_HIGH.test(e.message))
          throw withNonceOutcome(
            new SendError(
              "send_nonce_gap",
              `the chain refused nonce ${nonce} as out of order (${e.message}); the next send re-reads it`,
              { nonce },
            ),
            "unknown",
          );
        if (UNDERPRICED.test(e.message))
          throw new SendError(
            "send_underpriced",
            `the chain refused the fee: ${e.message}`,
            feeDetails(fields),
          );
        if (INSUFFICIENT.test(e.message))
          throw new SendError("send_insufficient_funds", `the chain refused the transaction: ${e.message}`, {
            address: from,
          });
        throw new SendError("send_rpc_failed", `the chain refused the transaction: ${e.message}`, { nonce });
      }
    }
  }
}

/** The fee fields and the type they make (legacy with an access list is type 1, EIP-2930). */
function feeFields(fees: Fees, accessList: boolean): Record<string, unknown> {
  return fees.type === 2
    ? {
        type: 2,
        maxFeePerGas: fees.maxFeePerGas.toString(),
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas.toString(),
      }
    : { type: accessList ? 1 : 0, gasPrice: fees.gasPrice.toString() };
}

function feeDetails(fields: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of ["gasPrice", "maxFeePerGas", "maxPriorityFeePerGas"])
    if (fields[k] !== undefined) out[k] = String(fields[k]);
  return out;
}

function hexQ(v: bigint): string {
  return "0x" + v.toString(16);
}

async function rpcCall(
  rpc: JsonRpcClient,
  method: string,
  params: unknown[],
  withinMs: number,
): Promise<string> {
  try {
    return await rpc.call<string>(method, params, withinMs);
  } catch (e) {
    throw rpcFailure(method, e);
  }
}

async function known(rpc: JsonRpcClient, hash: string, within: () => number): Promise<boolean> {
  try {
    return (await rpc.call<unknown>("eth_getTransactionByHash", [hash], within())) !== null;
  } catch {
    return false;
  }
}

function rpcFailure(what: string, e: unknown): SendError {
  if (e instanceof SendError) return e;
  const why =
    e instanceof RpcAnswerError || e instanceof RpcUnreachableError ? e.message : "unexpected answer";
  return new SendError("send_rpc_failed", `the chain's RPC failed while ${what}: ${why}`);
}
