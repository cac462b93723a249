/**
 * Content identifiers computed exactly as `ipfs add` does with its defaults (UnixFS file, fixed-size
 * 256 KiB chunks, balanced DAG with at most 174 links per node, dag-pb nodes, sha2-256):
 *   - CIDv0: leaves are dag-pb nodes wrapping UnixFS `file` data (`ipfs add`),
 *   - CIDv1: leaves are raw blocks (`ipfs add --cid-version 1`, which implies --raw-leaves).
 * A one-chunk file's CID is its single leaf. The encoding is hand-written here (a few protobuf fields)
 * and cross-checked in tests against ipfs-unixfs-importer, an independent implementation.
 *
 * Only sha2-256 CIDs of dag-pb or raw blocks are accepted: those are what we can verify.
 */
import { createHash } from "node:crypto";
import { CID } from "multiformats";
import { EnclaveError } from "./errors";
import { Lru } from "./lru";

export const CHUNK_SIZE = 262_144;
export const MAX_LINKS = 174;
const DAG_PB = 0x70;
const RAW = 0x55;
const SHA2_256 = 0x12;
const MAX_CID_STRING = 128;

interface Node {
  /** CID bytes (v0: the multihash; v1: 0x01 ‖ codec ‖ multihash). */
  cidBytes: Uint8Array;
  /** Bytes of the whole subtree (the dag-pb Tsize). */
  tsize: number;
  /** Bytes of file content under this node (UnixFS blocksize). */
  fileSize: number;
}

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return out;
}

/** Protobuf length-delimited field. */
function lenField(field: number, payload: Uint8Array): Uint8Array[] {
  return [Uint8Array.from([(field << 3) | 2, ...varint(payload.length)]), payload];
}

function varintField(field: number, n: number): Uint8Array {
  return Uint8Array.from([(field << 3) | 0, ...varint(n)]);
}

function concat(parts: Uint8Array[]): Uint8Array {
  return Buffer.concat(parts);
}

function sha256(bytes: Uint8Array): Uint8Array {
  return createHash("sha256").update(bytes).digest();
}

function cidBytesOf(block: Uint8Array, version: 0 | 1, codec: number): Uint8Array {
  const mh = concat([Uint8Array.of(SHA2_256, 32), sha256(block)]);
  return version === 0 ? mh : concat([Uint8Array.of(1, codec), mh]);
}

/** UnixFS Data message of type File (2). */
function unixfsFile(data: Uint8Array | null, fileSize: number, blockSizes: number[]): Uint8Array {
  const parts: Uint8Array[] = [varintField(1, 2)];
  if (data && data.length > 0) parts.push(...lenField(2, data));
  parts.push(varintField(3, fileSize));
  for (const b of blockSizes) parts.push(varintField(4, b));
  return concat(parts);
}

/** dag-pb PBNode: Links (field 2) before Data (field 1), each link {Hash, Name "", Tsize}. */
function pbNode(links: Node[], data: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const l of links) {
    const link = concat([
      ...lenField(1, l.cidBytes),
      ...lenField(2, new Uint8Array(0)),
      varintField(3, l.tsize),
    ]);
    parts.push(...lenField(2, link));
  }
  parts.push(...lenField(1, data));
  return concat(parts);
}

function leaf(chunk: Uint8Array, version: 0 | 1, rawLeaves: boolean): Node {
  if (rawLeaves) return { cidBytes: cidBytesOf(chunk, 1, RAW), tsize: chunk.length, fileSize: chunk.length };
  if (chunk.length === 0) {
    const block = pbNode([], unixfsFile(null, 0, []));
    return { cidBytes: cidBytesOf(block, version, DAG_PB), tsize: block.length, fileSize: 0 };
  }
  // PBNode{Data: UnixFS{Type: File, Data: chunk, filesize}}, hashed in three pieces so the chunk is never
  // copied (this is the hot path: one leaf per 256 KiB).
  const trailer = varintField(3, chunk.length);
  const unixfsHead = Uint8Array.from([0x08, 0x02, 0x12, ...varint(chunk.length)]);
  const unixfsLen = unixfsHead.length + chunk.length + trailer.length;
  const head = concat([Uint8Array.from([0x0a, ...varint(unixfsLen)]), unixfsHead]);
  const digest = createHash("sha256").update(head).update(chunk).update(trailer).digest();
  const mh = concat([Uint8Array.of(SHA2_256, 32), digest]);
  const cidBytes = version === 0 ? mh : concat([Uint8Array.of(1, DAG_PB), mh]);
  return { cidBytes, tsize: head.length + chunk.length + trailer.length, fileSize: chunk.length };
}

function parent(children: Node[], version: 0 | 1): Node {
  const fileSize = children.reduce((a, c) => a + c.fileSize, 0);
  const block = pbNode(
    children,
    unixfsFile(
      null,
      fileSize,
      children.map((c) => c.fileSize),
    ),
  );
  const tsize = block.length + children.reduce((a, c) => a + c.tsize, 0);
  return { cidBytes: cidBytesOf(block, version, DAG_PB), tsize, fileSize };
}

/** Root CID bytes of `bytes` under the given layout parameters. */
function rootCidBytes(bytes: Uint8Array, version: 0 | 1, rawLeaves: boolean): Uint8Array {
  const leaves: Node[] = [];
  for (let off = 0; off < bytes.length || off === 0; off += CHUNK_SIZE) {
    leaves.push(leaf(bytes.subarray(off, Math.min(off + CHUNK_SIZE, bytes.length)), version, rawLeaves));
    if (bytes.length === 0) break;
  }
  if (leaves.length === 1) return leaves[0].cidBytes;
  let level = leaves;
  for (;;) {
    const next: Node[] = [];
    for (let i = 0; i < level.length; i += MAX_LINKS)
      next.push(parent(level.slice(i, i + MAX_LINKS), version));
    if (next.length === 1) return next[0].cidBytes;
    level = next;
  }
}

function toBytes(bytes: unknown): Uint8Array {
  if (!(bytes instanceof Uint8Array)) {
    throw new EnclaveError("invalid_content", "Content must be bytes.", { details: "expected a Uint8Array" });
  }
  return bytes;
}

export function computeCidSync(bytes: Uint8Array, version: 0 | 1 = 0): string {
  const data = toBytes(bytes);
  return CID.decode(rootCidBytes(data, version, version === 1)).toString();
}

/** CIDv0 (default) exactly like `ipfs add`; CIDv1 like `ipfs add --cid-version 1` (raw leaves). */
export async function computeCid(bytes: Uint8Array, opts: { version?: 0 | 1 } = {}): Promise<string> {
  const version = opts.version ?? 0;
  if (version !== 0 && version !== 1) {
    throw new EnclaveError("invalid_cid", "Unsupported CID version.", { details: "version must be 0 or 1" });
  }
  return computeCidSync(bytes, version);
}

function decodeCid(cid: unknown): CID {
  if (typeof cid !== "string" || cid.length === 0 || cid.length > MAX_CID_STRING) {
    throw new EnclaveError("invalid_cid", "Invalid CID.", { details: "expected a CIDv0 or CIDv1 string" });
  }
  let parsed: CID;
  try {
    parsed = CID.parse(cid) as CID;
  } catch {
    throw new EnclaveError("invalid_cid", "Invalid CID.", { details: "not a CID string" });
  }
  if (parsed.version === 0 && !cid.startsWith("Qm")) {
    throw new EnclaveError("invalid_cid", "Invalid CID.", { details: "CIDv0 must be base58btc" });
  }
  if (parsed.multihash.code !== SHA2_256 || parsed.multihash.digest.length !== 32) {
    throw new EnclaveError("invalid_cid", "Unsupported CID.", {
      details: "only sha2-256 CIDs are supported",
    });
  }
  if (parsed.code !== DAG_PB && parsed.code !== RAW) {
    throw new EnclaveError("invalid_cid", "Unsupported CID.", {
      details: "only dag-pb and raw CIDs are supported",
    });
  }
  return parsed;
}

/** Validates a CIDv0/v1 string and returns its canonical form (v0: base58btc, v1: base32). */
/**
 * Canonical forms of recently parsed CID strings. Parsing (base58 or base32 decoding, multihash
 * checks) is a pure function of the string, and every execution by CID parses one, usually the same
 * few: remember valid ones (invalid ones are never cached, so each is refused afresh).
 */
const canonicalCids = new Lru<string, string>(10_000);

export function parseCid(cid: string): string {
  const hit = typeof cid === "string" ? canonicalCids.get(cid) : undefined;
  if (hit !== undefined) return hit;
  const canonical = decodeCid(cid).toString();
  canonicalCids.set(cid, canonical);
  return canonical;
}

export function isValidCid(cid: string): boolean {
  try {
    parseCid(cid);
    return true;
  } catch {
    return false;
  }
}

/**
 * True when `bytes` is the file content that `cid` names. v0 and v1 dag-pb CIDs are recomputed with
 * `ipfs add` defaults (v1 with raw leaves first, then with dag-pb leaves, which `--raw-leaves=false`
 * produces); a v1 raw CID is the SHA-256 of the bytes. Content added with another chunker or layout
 * cannot be verified this way and is refused (docs/enclave.md).
 */
export function contentMatchesCid(cid: string, bytes: Uint8Array): boolean {
  const c = decodeCid(cid);
  const want = c.bytes;
  const eq = (b: Uint8Array) => Buffer.compare(Buffer.from(b), Buffer.from(want)) === 0;
  if (c.version === 0) return eq(rootCidBytes(bytes, 0, false));
  if (c.code === RAW) return eq(cidBytesOf(bytes, 1, RAW));
  return eq(rootCidBytes(bytes, 1, true)) || eq(rootCidBytes(bytes, 1, false));
}
