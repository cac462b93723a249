import fs from "node:fs";
import path from "node:path";
import { ethers } from "ethers";
import Safe, { EthSafeSignature } from "@safe-global/protocol-kit";
import type { SafeTransaction } from "@safe-global/types-kit";
import { SafeCliError } from "./errors";
import { connectSafe, type SafeContext } from "./kit";
import { requireAddress, rpcProvider, walletFromKey } from "./chain";
import { decodeRegistryError } from "./registryCalls";

export const PROPOSAL_FORMAT = "sigil-safe-proposal/1";

/** The fields of a Safe transaction that its hash commits to (Safe 1.4.1 `SafeTx` EIP-712 type). */
export interface SafeTxFields {
  to: string;
  value: string;
  data: string;
  operation: 0 | 1;
  safeTxGas: string;
  baseGas: string;
  gasPrice: string;
  gasToken: string;
  refundReceiver: string;
  nonce: number;
}

/**
 * A proposal file: everything owners need to check and sign a Safe transaction offline and hand it on.
 * Signatures are appended one owner at a time; `safeTxHash` is re-derived on chain before every use.
 */
export interface ProposalFile {
  format: typeof PROPOSAL_FORMAT;
  chainId: string;
  safe: string;
  description: string;
  call?: { method: string; args: unknown[] };
  tx: SafeTxFields;
  safeTxHash: string;
  signatures: { signer: string; data: string }[];
  createdAt: string;
}

export interface ProposeOptions {
  safe: string;
  to: string;
  data: string;
  value?: bigint;
  description?: string;
  call?: { method: string; args: unknown[] };
  /** Queue behind other proposals; defaults to the Safe's current nonce. */
  nonce?: number;
}

// A throwaway signer for read-only kit use: protocol-kit must never fall back to eth_accounts[0].
const READ_ONLY_KEY = ethers.keccak256(ethers.toUtf8Bytes("sigil/safe/read-only-signer"));

function txFields(tx: SafeTransaction): SafeTxFields {
  const d = tx.data;
  return {
    to: ethers.getAddress(d.to),
    value: String(d.value),
    data: d.data,
    operation: Number(d.operation) as 0 | 1,
    safeTxGas: String(d.safeTxGas),
    baseGas: String(d.baseGas),
    gasPrice: String(d.gasPrice),
    gasToken: ethers.getAddress(d.gasToken),
    refundReceiver: ethers.getAddress(d.refundReceiver),
    nonce: Number(d.nonce),
  };
}

/** Rebuild protocol-kit's SafeTransaction from the file's fields (and its signatures). */
async function toSafeTransaction(kit: Safe, p: ProposalFile): Promise<SafeTransaction> {
  const { to, value, data, operation, ...options } = p.tx;
  const tx = await kit.createTransaction({ transactions: [{ to, value, data, operation }], options });
  for (const s of p.signatures) tx.addSignature(new EthSafeSignature(s.signer, s.data));
  return tx;
}

/** Create a proposal for `safe` (not yet signed). */
export async function propose(ctx: SafeContext, opts: ProposeOptions): Promise<ProposalFile> {
  const kit = await connectSafe(ctx, opts.safe, READ_ONLY_KEY);
  const nonce = opts.nonce ?? (await kit.getNonce());
  const tx = await kit.createTransaction({
    transactions: [
      {
        to: requireAddress(opts.to, "the target"),
        value: String(opts.value ?? 0n),
        data: opts.data,
        operation: 0,
      },
    ],
    options: { nonce },
  });
  return {
    format: PROPOSAL_FORMAT,
    chainId: String(ctx.chainId),
    safe: await kit.getAddress(),
    description: opts.description ?? (opts.call ? opts.call.method : "Safe transaction"),
    call: opts.call,
    tx: txFields(tx),
    safeTxHash: await kit.getTransactionHash(tx),
    signatures: [],
    createdAt: new Date().toISOString(),
  };
}

export function readProposal(file: string): ProposalFile {
  let p: ProposalFile;
  try {
    p = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (cause) {
    throw new SafeCliError(
      "invalid_proposal_file",
      `cannot read the proposal ${file}: ${(cause as Error).message}`,
      { file },
      cause,
    );
  }
  const ok =
    p?.format === PROPOSAL_FORMAT &&
    typeof p.chainId === "string" &&
    ethers.isAddress(p.safe) &&
    typeof p.safeTxHash === "string" &&
    p.tx !== null &&
    typeof p.tx === "object" &&
    Array.isArray(p.signatures);
  if (!ok)
    throw new SafeCliError("invalid_proposal_file", `${file} is not a ${PROPOSAL_FORMAT} file`, { file });
  return p;
}

/** Write atomically (temp file + rename) so a crash never leaves half a proposal. */
export function writeProposal(file: string, p: ProposalFile): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(p, null, 2) + "\n");
  fs.renameSync(tmp, file);
}

/**
 * Who produced an ECDSA signature over `safeTxHash`, or null if it does not parse. Safe marks eth_sign
 * signatures with v + 4 (31/32) and keeps 27/28 for signatures over the EIP-712 digest itself.
 */
export function recoverSigner(safeTxHash: string, signature: string): string | null {
  try {
    if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) return null;
    const v = parseInt(signature.slice(-2), 16);
    if (v > 30) {
      const sig = signature.slice(0, -2) + (v - 4).toString(16);
      return ethers.recoverAddress(ethers.hashMessage(ethers.getBytes(safeTxHash)), sig);
    }
    return ethers.recoverAddress(safeTxHash, signature);
  } catch {
    return null;
  }
}

export interface ProposalStatus {
  safe: string;
  safeTxHash: string;
  description: string;
  nonce: number;
  safeNonce: number;
  threshold: number;
  owners: string[];
  signatures: { signer: string; valid: boolean; owner: boolean }[];
  /** Valid signatures from current owners. */
  collected: number;
  state: "collecting" | "ready" | "executed" | "stale" | "queued";
  executedIn?: string;
}

/** Checks shared by sign, status and execute: same chain, same Safe, the hash still matches. */
async function openProposal(ctx: SafeContext, p: ProposalFile, signerKey: string, expectedSafe?: string) {
  if (p.chainId !== String(ctx.chainId)) {
    throw new SafeCliError(
      "wrong_chain",
      `the proposal is for chain ${p.chainId}, the RPC serves chain ${ctx.chainId}`,
      {
        proposalChainId: p.chainId,
        chainId: String(ctx.chainId),
      },
    );
  }
  if (expectedSafe && requireAddress(expectedSafe, "the Safe") !== ethers.getAddress(p.safe)) {
    throw new SafeCliError(
      "wrong_safe",
      `the proposal is for Safe ${p.safe}, not ${ethers.getAddress(expectedSafe)}`,
      {
        proposalSafe: p.safe,
        safe: ethers.getAddress(expectedSafe),
      },
    );
  }
  const kit = await connectSafe(ctx, p.safe, signerKey);
  const tx = await toSafeTransaction(kit, p);
  const hash = await kit.getTransactionHash(tx);
  if (hash !== p.safeTxHash) {
    throw new SafeCliError(
      "proposal_mismatch",
      "the proposal's transaction fields do not hash to its safeTxHash (edited file?)",
      {
        fileHash: p.safeTxHash,
        computedHash: hash,
      },
    );
  }
  return { kit, tx };
}

async function executedIn(ctx: SafeContext, p: ProposalFile): Promise<string | undefined> {
  // Safe 1.4.1: `event ExecutionSuccess(bytes32 indexed txHash, uint256 payment)`.
  const logs = await rpcProvider(ctx.rpcUrl).getLogs({
    address: p.safe,
    topics: [ethers.id("ExecutionSuccess(bytes32,uint256)"), p.safeTxHash],
    fromBlock: 0,
    toBlock: "latest",
  });
  return logs[0]?.transactionHash;
}

export async function proposalStatus(
  ctx: SafeContext,
  p: ProposalFile,
  expectedSafe?: string,
): Promise<ProposalStatus> {
  const { kit } = await openProposal(ctx, p, READ_ONLY_KEY, expectedSafe);
  const [owners, threshold, safeNonce] = await Promise.all([
    kit.getOwners(),
    kit.getThreshold(),
    kit.getNonce(),
  ]);
  const ownerSet = new Set(owners.map((o) => ethers.getAddress(o)));
  const seen = new Set<string>();
  const signatures = p.signatures.map((s) => {
    const recovered = recoverSigner(p.safeTxHash, s.data);
    const valid = recovered !== null && recovered === ethers.getAddress(s.signer) && !seen.has(recovered);
    if (valid) seen.add(recovered!);
    return { signer: ethers.getAddress(s.signer), valid, owner: ownerSet.has(ethers.getAddress(s.signer)) };
  });
  const collected = signatures.filter((s) => s.valid && s.owner).length;
  let state: ProposalStatus["state"];
  let executedTx: string | undefined;
  if (safeNonce > p.tx.nonce) {
    executedTx = await executedIn(ctx, p);
    state = executedTx ? "executed" : "stale";
  } else if (safeNonce < p.tx.nonce) {
    state = "queued";
  } else {
    state = collected >= threshold ? "ready" : "collecting";
  }
  return {
    safe: p.safe,
    safeTxHash: p.safeTxHash,
    description: p.description,
    nonce: p.tx.nonce,
    safeNonce,
    threshold,
    owners: [...ownerSet],
    signatures,
    collected,
    state,
    executedIn: executedTx,
  };
}

function refuseFinished(status: ProposalStatus): void {
  if (status.state === "executed") {
    throw new SafeCliError("already_executed", `the proposal was already executed in ${status.executedIn}`, {
      txHash: status.executedIn,
    });
  }
  if (status.state === "stale") {
    throw new SafeCliError(
      "stale_nonce",
      `the Safe's nonce moved on to ${status.safeNonce} since this proposal (nonce ${status.nonce}); propose it again`,
      { proposalNonce: status.nonce, safeNonce: status.safeNonce },
    );
  }
}

/** Sign the proposal as one owner and return the file with the signature appended. */
export async function signProposal(
  ctx: SafeContext,
  p: ProposalFile,
  signerKey: string,
  expectedSafe?: string,
): Promise<ProposalFile> {
  const status = await proposalStatus(ctx, p, expectedSafe);
  refuseFinished(status);
  const signer = walletFromKey(signerKey).address;
  if (!status.owners.includes(signer)) {
    throw new SafeCliError("not_owner", `${signer} is not an owner of Safe ${p.safe}`, {
      signer,
      owners: status.owners,
    });
  }
  if (p.signatures.some((s) => ethers.getAddress(s.signer) === signer)) {
    throw new SafeCliError("already_signed", `${signer} has already signed this proposal`, { signer });
  }
  const { kit, tx } = await openProposal(ctx, { ...p, signatures: [] }, signerKey, expectedSafe);
  const signed = await kit.signTransaction(tx);
  const sig = signed.getSignature(signer.toLowerCase()) ?? signed.getSignature(signer);
  if (!sig) throw new Error("protocol-kit returned no signature for the signer"); // a bug, not a user error
  return { ...p, signatures: [...p.signatures, { signer, data: sig.data }] };
}

/**
 * Execute the proposal from `executorKey` (any funded account; it need not be an owner). The call is
 * simulated from the Safe first so a registry refusal comes back decoded (e.g. `MissingScope`) instead
 * of Safe's opaque GS013.
 */
export async function executeProposal(
  ctx: SafeContext,
  p: ProposalFile,
  executorKey: string,
  expectedSafe?: string,
): Promise<{ txHash: string; blockNumber: number }> {
  const status = await proposalStatus(ctx, p, expectedSafe);
  refuseFinished(status);
  if (status.state === "queued") {
    throw new SafeCliError(
      "stale_nonce",
      `the proposal's nonce ${status.nonce} is ahead of the Safe's nonce ${status.safeNonce}; execute the earlier ones first`,
      {
        proposalNonce: status.nonce,
        safeNonce: status.safeNonce,
      },
    );
  }
  if (status.collected < status.threshold) {
    throw new SafeCliError(
      "insufficient_signatures",
      `${status.collected} of ${status.threshold} required owner signatures collected`,
      {
        collected: status.collected,
        threshold: status.threshold,
      },
    );
  }
  const provider = rpcProvider(ctx.rpcUrl);
  try {
    await provider.call({ from: p.safe, to: p.tx.to, data: p.tx.data, value: BigInt(p.tx.value) });
  } catch (cause) {
    const data = (cause as { data?: string }).data;
    const decoded = decodeRegistryError(data);
    throw new SafeCliError(
      "execution_reverted",
      decoded
        ? `the call would revert: ${decoded.name}(${decoded.args.join(", ")})`
        : `the call would revert: ${(cause as Error).message}`,
      { error: decoded?.name, args: decoded?.args, data },
      cause,
    );
  }
  const valid = p.signatures.filter((s, i) => status.signatures[i].valid && status.signatures[i].owner);
  const { kit, tx } = await openProposal(ctx, { ...p, signatures: valid }, executorKey, expectedSafe);
  const result = await kit.executeTransaction(tx);
  const receipt = await provider.waitForTransaction(result.hash);
  if (!receipt || receipt.status !== 1) {
    throw new SafeCliError("execution_reverted", `the Safe transaction ${result.hash} reverted`, {
      txHash: result.hash,
    });
  }
  return { txHash: result.hash, blockNumber: receipt.blockNumber };
}

/**
 * Propose, sign with every key in `ownerKeys` and execute from `executorKey` in one go: the whole
 * multisig round trip for scripts and tests whose owners' keys are all at hand.
 */
export async function proposeSignExecute(
  ctx: SafeContext,
  opts: ProposeOptions & { ownerKeys: string[]; executorKey: string },
): Promise<{ proposal: ProposalFile; txHash: string; blockNumber: number }> {
  let p = await propose(ctx, opts);
  for (const key of opts.ownerKeys) p = await signProposal(ctx, p, key);
  const r = await executeProposal(ctx, p, opts.executorKey);
  return { proposal: p, ...r };
}
