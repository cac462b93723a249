/**
 * The offline verifier of an audit-log export (docs/audit-log.md, "Verifying"). It needs nothing but the
 * export and the identity address from the deployment's attestation document (verifyAttestation): it
 * recomputes every entry's hash and the chain's links, checks every checkpoint's signature against that
 * identity and that each checkpoint's head is the chain's hash at its sequence, and reports the first
 * break with its sequence. It shares no code with the service: the format is written out here again, and
 * a test checks that what the service exports verifies here.
 */
import { JsonRpcProvider, getAddress, id, sha256, toBeHex, toUtf8Bytes, verifyMessage } from "ethers";
import { canonicalJson } from "./attestation";

export const AUDIT_EXPORT_FORMAT = "sigil-audit-export/v1";
const ENTRY_FORMAT = "sigil-audit-entry/v1";
const CHECKPOINT_FORMAT = "sigil-audit-checkpoint/v1";
/** The prefix of the EIP-191 message the identity key signs for a checkpoint: its digest follows. */
export const AUDIT_CHECKPOINT_DOMAIN = "sigil-audit-checkpoint/v1:";
const GENESIS_HASH = "0x" + "00".repeat(32);

export type AuditEntryKind = "execution" | "write" | "chain_write" | "refusal" | "billing";

export interface AuditEntry {
  type: "entry";
  account: string;
  seq: number;
  prev_hash: string;
  hash: string;
  kind: AuditEntryKind;
  time_ms: number;
  data: Record<string, unknown>;
}

export interface AuditCheckpoint {
  type: "checkpoint";
  account: string;
  seq: number;
  head_hash: string;
  time_ms: number;
  signer: string;
  signature: string;
  /** Present when the checkpoint was anchored on chain (verifyAuditAnchors checks it). */
  anchor?: AuditCheckpointAnchor;
}

export interface AuditExportHeader {
  type: "header";
  format: string;
  account: string;
  /** The identity the service says signed the checkpoints: check it against the attestation you trust. */
  identity: string;
  exported_at_ms: number;
}

export type AuditLine = AuditExportHeader | AuditEntry | AuditCheckpoint;

export type AuditBreakReason =
  | "malformed"
  | "wrong_account"
  | "missing_entry"
  | "out_of_order"
  | "broken_link"
  | "hash_mismatch"
  | "bad_signature"
  | "checkpoint_mismatch"
  | "uncovered_start"
  | "truncated";

export interface AuditBreak {
  /** The first sequence number at which the export stops being what the service signed. */
  seq: number;
  reason: AuditBreakReason;
  message: string;
}

export interface AuditVerification {
  ok: boolean;
  account: string | null;
  /** The identity every checkpoint was checked against. */
  identity: string | null;
  entries: number;
  checkpoints: number;
  firstSeq: number | null;
  lastSeq: number | null;
  /** The highest sequence a valid checkpoint covers: entries after it are chained but not yet signed. */
  signedThrough: number;
  /** Present when ok is false. */
  break?: AuditBreak;
}

export interface VerifyAuditOptions {
  /**
   * The identity address to check signatures against: the one in the attestation document you
   * verified. Without it the export's own header is believed, which proves only internal consistency.
   */
  identity?: string;
}

export function auditEntryHash(e: Omit<AuditEntry, "type" | "hash">): string {
  return sha256(
    toUtf8Bytes(
      canonicalJson({
        format: ENTRY_FORMAT,
        account: e.account,
        seq: e.seq,
        prev_hash: e.prev_hash,
        kind: e.kind,
        time_ms: e.time_ms,
        data: e.data,
      }),
    ),
  );
}

export function auditCheckpointDigest(
  c: Pick<AuditCheckpoint, "account" | "seq" | "head_hash" | "time_ms">,
): string {
  return sha256(
    toUtf8Bytes(
      canonicalJson({
        format: CHECKPOINT_FORMAT,
        account: c.account,
        seq: c.seq,
        head_hash: c.head_hash,
        time_ms: c.time_ms,
      }),
    ),
  );
}

/** The JSON Lines of an export, parsed (blank lines skipped); throws on a line that is not JSON. */
export function parseAuditExport(text: string): AuditLine[] {
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as AuditLine);
}

const isInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v);
const isHash = (v: unknown): v is string => typeof v === "string" && /^0x[0-9a-f]{64}$/.test(v);

function sameAddress(a: string, b: string): boolean {
  try {
    return getAddress(a) === getAddress(b);
  } catch {
    return false;
  }
}

/**
 * Verifies an export (its lines, or its text). The chain must start at sequence 1 with the genesis hash,
 * or (after retention pruned older entries) right after a signed checkpoint whose head is the first
 * entry's previous hash. A checkpoint beyond the last entry means entries were cut from the end.
 */
export function verifyAuditExport(
  input: string | AuditLine[],
  opts: VerifyAuditOptions = {},
): AuditVerification {
  const out: AuditVerification = {
    ok: true,
    account: null,
    identity: opts.identity ?? null,
    entries: 0,
    checkpoints: 0,
    firstSeq: null,
    lastSeq: null,
    signedThrough: 0,
  };
  const fail = (seq: number, reason: AuditBreakReason, message: string): AuditVerification => ({
    ...out,
    ok: false,
    break: { seq, reason, message },
  });
  let lines: AuditLine[];
  try {
    lines = typeof input === "string" ? parseAuditExport(input) : input;
  } catch {
    return fail(0, "malformed", "A line of the export is not JSON.");
  }
  const header = lines.find((l): l is AuditExportHeader => l?.type === "header");
  if (!header || header.format !== AUDIT_EXPORT_FORMAT || typeof header.account !== "string")
    return fail(0, "malformed", `The export has no ${AUDIT_EXPORT_FORMAT} header line.`);
  out.account = header.account;
  out.identity ??= typeof header.identity === "string" ? header.identity : null;
  if (out.identity === null) return fail(0, "malformed", "No identity to check the checkpoints against.");
  const identity = out.identity;

  const entries = lines.filter((l): l is AuditEntry => l?.type === "entry");
  const checkpoints = lines.filter((l): l is AuditCheckpoint => l?.type === "checkpoint");
  out.entries = entries.length;
  out.checkpoints = checkpoints.length;

  // Checkpoints first: each must be signed by the identity, for this account.
  const signedHeads = new Map<number, string>();
  for (const c of checkpoints) {
    if (!isInt(c.seq) || !isHash(c.head_hash) || !isInt(c.time_ms) || typeof c.signature !== "string")
      return fail(isInt(c.seq) ? c.seq : 0, "malformed", "A checkpoint line is malformed.");
    if (c.account !== header.account)
      return fail(c.seq, "wrong_account", `The checkpoint at ${c.seq} is for account ${c.account}.`);
    let signer: string;
    try {
      signer = verifyMessage(AUDIT_CHECKPOINT_DOMAIN + auditCheckpointDigest(c), c.signature);
    } catch {
      return fail(c.seq, "bad_signature", `The checkpoint at ${c.seq} has a signature that does not decode.`);
    }
    if (!sameAddress(signer, identity))
      return fail(c.seq, "bad_signature", `The checkpoint at ${c.seq} was not signed by ${identity}.`);
    signedHeads.set(c.seq, c.head_hash);
  }

  let prev: AuditEntry | null = null;
  for (const e of entries) {
    const expected: number | null = prev ? prev.seq + 1 : null;
    if (!isInt(e.seq) || !isHash(e.hash) || !isHash(e.prev_hash) || !isInt(e.time_ms))
      return fail(expected ?? 0, "malformed", `The entry after ${prev?.seq ?? "the start"} is malformed.`);
    if (e.account !== header.account)
      return fail(e.seq, "wrong_account", `The entry at ${e.seq} is for account ${e.account}.`);
    if (expected !== null && e.seq !== expected) {
      return e.seq > expected
        ? fail(expected, "missing_entry", `Entry ${expected} is missing (the next one is ${e.seq}).`)
        : fail(expected, "out_of_order", `Entry ${expected} was expected; ${e.seq} came instead.`);
    }
    if (prev === null) {
      out.firstSeq = e.seq;
      const startOk = e.seq === 1 ? e.prev_hash === GENESIS_HASH : signedHeads.get(e.seq - 1) === e.prev_hash;
      if (!startOk)
        return fail(
          e.seq,
          e.seq === 1 ? "broken_link" : "uncovered_start",
          e.seq === 1
            ? "The first entry does not start from the genesis hash."
            : `The export starts at ${e.seq}, but no signed checkpoint at ${e.seq - 1} holds its previous hash.`,
        );
    } else if (e.prev_hash !== prev.hash) {
      return fail(e.seq, "broken_link", `Entry ${e.seq} does not link to entry ${prev.seq}'s hash.`);
    }
    if (auditEntryHash(e) !== e.hash)
      return fail(
        e.seq,
        "hash_mismatch",
        `Entry ${e.seq} is not what was chained (its content was changed).`,
      );
    const signed = signedHeads.get(e.seq);
    if (signed !== undefined) {
      if (signed !== e.hash)
        return fail(e.seq, "checkpoint_mismatch", `The signed checkpoint at ${e.seq} holds another hash.`);
      out.signedThrough = e.seq;
    }
    prev = e;
  }
  out.lastSeq = prev?.seq ?? null;
  const last = prev?.seq ?? 0;
  const beyond = [...signedHeads.keys()].filter((s) => s > last).sort((a, b) => a - b);
  if (beyond.length > 0)
    return fail(
      last + 1,
      "truncated",
      `A signed checkpoint covers entry ${beyond[beyond.length - 1]}, but the export ends at ${last}.`,
    );
  return out;
}

/** Where a checkpoint was anchored on chain (docs/audit-log.md, "Anchoring"), as the export carries it. */
export interface AuditCheckpointAnchor {
  chain_id: number;
  contract: string;
  tx_hash: string;
  block_number: number;
}

export interface AuditAnchorVerification {
  ok: boolean;
  /** Anchored checkpoints checked against the chain (all of the export's, when ok). */
  anchored: number;
  /** The highest sequence an anchor on chain covers (0: none). */
  anchoredThrough: number;
  /** Present when ok is false: the checkpoint whose anchor does not hold. */
  break?: { seq: number; reason: "anchor_missing" | "anchor_mismatch" | "wrong_chain"; message: string };
}

/** topic0 of AuditCheckpointAnchored(uint256 indexed accountId, uint64 indexed sequence, bytes32 headHash). */
const ANCHORED_TOPIC = id("AuditCheckpointAnchored(uint256,uint64,bytes32)");

/**
 * Checks every anchored checkpoint of an export against the chain (an RPC URL of the chain the anchors
 * name, or a provider): the transaction the checkpoint names succeeded, in the block it names, and holds
 * an AuditCheckpointAnchored event from the anchor contract with exactly the checkpoint's account,
 * sequence and head hash. Run it after verifyAuditExport, which checks the checkpoints themselves.
 */
export async function verifyAuditAnchors(
  input: string | AuditLine[],
  chain: { rpcUrl: string } | { provider: JsonRpcProvider },
): Promise<AuditAnchorVerification> {
  const lines = typeof input === "string" ? parseAuditExport(input) : input;
  const anchored = lines.filter(
    (l): l is AuditCheckpoint & { anchor: AuditCheckpointAnchor } =>
      l?.type === "checkpoint" && typeof (l as { anchor?: unknown }).anchor === "object",
  );
  const out: AuditAnchorVerification = { ok: true, anchored: 0, anchoredThrough: 0 };
  if (anchored.length === 0) return out;
  const provider = "provider" in chain ? chain.provider : new JsonRpcProvider(chain.rpcUrl);
  try {
    const chainId = Number((await provider.getNetwork()).chainId);
    for (const c of anchored) {
      const fail = (reason: NonNullable<AuditAnchorVerification["break"]>["reason"], message: string) => ({
        ...out,
        ok: false,
        break: { seq: c.seq, reason, message },
      });
      const a = c.anchor;
      if (a.chain_id !== chainId)
        return fail(
          "wrong_chain",
          `The checkpoint at ${c.seq} is anchored on chain ${a.chain_id}, not ${chainId}.`,
        );
      const receipt = typeof a.tx_hash === "string" ? await provider.getTransactionReceipt(a.tx_hash) : null;
      if (receipt === null || receipt.status !== 1 || receipt.blockNumber !== a.block_number)
        return fail(
          "anchor_missing",
          `The checkpoint at ${c.seq} names anchor transaction ${a.tx_hash}, which is not a successful transaction in block ${a.block_number}.`,
        );
      const topics = [ANCHORED_TOPIC, toBeHex(BigInt(c.account), 32), toBeHex(BigInt(c.seq), 32)];
      const found = receipt.logs.some(
        (l) =>
          sameAddress(l.address, a.contract) &&
          l.topics.length === 3 &&
          l.topics.every((t, i) => t.toLowerCase() === topics[i]) &&
          l.data.toLowerCase() === c.head_hash,
      );
      if (!found)
        return fail(
          "anchor_mismatch",
          `The anchor transaction of the checkpoint at ${c.seq} does not emit its account, sequence and head hash from ${a.contract}.`,
        );
      out.anchored++;
      out.anchoredThrough = Math.max(out.anchoredThrough, c.seq);
    }
    return out;
  } finally {
    if (!("provider" in chain)) provider.destroy();
  }
}
