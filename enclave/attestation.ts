/**
 * Attestation (docs/enclave.md, "Attestation"): what lets a client check which code a deployment runs and
 * which root key stands behind it, without trusting the network path.
 *
 *  - The identity key: a secp256k1 key derived from the root key under its own label
 *    (LABELS.identity, id "root"). Its public key and address are the root key's public identity: the same
 *    root key gives the same identity on every instance and restart, and knowing it reveals nothing about
 *    the root key or any other derived key. It signs attestation documents, so a client can pin it.
 *  - The document is signed as an EIP-191 personal message over its canonical JSON (canonicalJson), so
 *    any Ethereum library verifies it: `ethers.verifyMessage(canonicalJson(doc minus signature), sig)`.
 *  - The measurement: SHA-256 over a canonical listing of the enclave's code as built (measureEnclave).
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { hashMessage } from "ethers";
import { deriveSecp256k1, LABELS, type RootKey } from "./derive";
import { addressOf, hex, publicKeyOf, signDigest } from "./secp";

/** The `format` field of every attestation document of this version. */
export const ATTESTATION_FORMAT = "sigil-attestation/v1";

const IDENTITY_ID = new TextEncoder().encode("root");

function withIdentityKey<T>(root: RootKey, use: (k: Uint8Array) => T): T {
  const k = deriveSecp256k1(root, LABELS.identity, IDENTITY_ID);
  try {
    return use(k);
  } finally {
    k.fill(0);
  }
}

/** The root key's public identity: address and uncompressed public key (0x04 ‖ x ‖ y) of the identity key. */
export function identityOf(root: RootKey): { address: string; publicKey: string } {
  return withIdentityKey(root, (k) => ({ address: addressOf(k), publicKey: hex(publicKeyOf(k)) }));
}

/**
 * JSON with object keys sorted (by UTF-16 code unit, JavaScript's default sort), no whitespace, and only
 * the values JSON has (strings, finite numbers, booleans, null, arrays, plain objects): the same bytes for
 * the same document, whoever serialises it.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError("canonicalJson: numbers must be finite");
    return JSON.stringify(value);
  }
  // Loops and string appends rather than entries/filter/map/join: the audit log serializes every
  // entry with this on the request path (docs/audit-log.md, "What it costs").
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) out += (i === 0 ? "" : ",") + canonicalJson(value[i]);
    return out + "]";
  }
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    const o = value as Record<string, unknown>;
    // The default sort compares UTF-16 code units, as the rule says.
    const keys = Object.keys(o).sort();
    let out = "{";
    for (const k of keys) {
      const v = o[k];
      if (v === undefined) continue;
      out += (out.length === 1 ? "" : ",") + JSON.stringify(k) + ":" + canonicalJson(v);
    }
    return out + "}";
  }
  throw new TypeError(`canonicalJson: ${typeof value} is not a JSON value`);
}

/**
 * The fields of a document the TEE quote binds: all of them except the signature and the hardware
 * evidence itself (the quote cannot contain its own hash, and the event log is checked against the quote).
 */
export const UNBOUND_FIELDS = ["signature", "quote", "event_log"] as const;

/**
 * The 64 bytes a TDX quote's REPORTDATA carries for an attestation document: SHA-512 of the canonical JSON
 * of its bound fields (everything but UNBOUND_FIELDS). SHA-512 fills REPORTDATA exactly, so there is no
 * padding rule to get wrong. The SDK computes the same (sdk/tdx.ts; a test checks they agree).
 */
export function attestationReportData(doc: Record<string, unknown>): Uint8Array {
  const bound = Object.fromEntries(
    Object.entries(doc).filter(([k]) => !(UNBOUND_FIELDS as readonly string[]).includes(k)),
  );
  return Uint8Array.from(createHash("sha512").update(canonicalJson(bound), "utf8").digest());
}

/** The identity key's EIP-191 signature over the canonical JSON of `fields` (the document minus `signature`). */
export function signAttestationFields(root: RootKey, fields: Record<string, unknown>): string {
  const digest = Buffer.from(hashMessage(canonicalJson(fields)).slice(2), "hex");
  return withIdentityKey(root, (k) => signDigest(k, digest));
}

/**
 * Audit-log checkpoints (docs/audit-log.md) are signed by the same identity key, as an EIP-191 personal
 * message over this prefix followed by the checkpoint's digest (0x + 64 hex). The domain keeps the two
 * uses apart: an attestation document's message is canonical JSON, which always starts with "{", so no
 * checkpoint signature can be presented as an attestation (or the reverse); and a transaction or an
 * EIP-712 forward request is never an EIP-191 personal message, so none can be either.
 */
export const AUDIT_CHECKPOINT_DOMAIN = "sigil-audit-checkpoint/v1:";

const DIGEST_HEX = /^0x[0-9a-f]{64}$/;

/** The exact text the identity key signs for a checkpoint digest (lowercase hex only). */
export function auditCheckpointMessage(digest: string): string {
  if (typeof digest !== "string" || !DIGEST_HEX.test(digest))
    throw new TypeError("auditCheckpointMessage: the digest must be 0x followed by 64 lowercase hex digits");
  return AUDIT_CHECKPOINT_DOMAIN + digest;
}

/** The identity key's EIP-191 signature over auditCheckpointMessage(digest). */
export function signAuditCheckpointDigest(root: RootKey, digest: string): string {
  const message = Buffer.from(hashMessage(auditCheckpointMessage(digest)).slice(2), "hex");
  return withIdentityKey(root, (k) => signDigest(k, message));
}

// ---- Measurement ----------------------------------------------------------------------------------

export interface Measurement {
  /** 0x + SHA-256 (hex) of `listing`. */
  measurement: string;
  /** The exact text that was hashed: one line per file, then one per dependency. */
  listing: string;
}

const sha256 = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");

function filesUnder(dir: string, rel: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = rel + "/" + e.name;
    if (e.isDirectory()) out.push(...filesUnder(path.join(dir, e.name), p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

/** Packages the enclave's code names in import/require/import() (bare specifiers, no node: built-ins). */
function importedPackages(sources: string[]): Set<string> {
  const names = new Set<string>();
  const re = /(?:\bfrom\s*|\brequire\(\s*|\bimport\(\s*|\brequire\.resolve\(\s*)["']([^"'./][^"']*)["']/g;
  for (const src of sources) {
    for (const m of src.matchAll(re)) {
      const spec = m[1];
      if (spec.startsWith("node:")) continue;
      const parts = spec.split("/");
      names.add(spec.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]);
    }
  }
  return names;
}

interface LockEntry {
  version?: string;
  integrity?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** Node's lookup of `name` from the package installed at lock path `from` ("" = the project). */
function resolveInLock(packages: Record<string, LockEntry>, from: string, name: string): string | null {
  let base = from;
  for (;;) {
    const candidate = (base ? base + "/" : "") + "node_modules/" + name;
    if (packages[candidate]) return candidate;
    if (!base) return null;
    const at = base.lastIndexOf("/node_modules/");
    base = at === -1 ? "" : base.slice(0, at);
  }
}

/** The lock paths of `roots` and everything they depend on, transitively. */
function dependencyClosure(packages: Record<string, LockEntry>, roots: Iterable<string>): string[] {
  const seen = new Set<string>();
  const queue: string[] = [];
  const visit = (from: string, name: string) => {
    const at = resolveInLock(packages, from, name);
    if (at && !seen.has(at)) {
      seen.add(at);
      queue.push(at);
    }
  };
  for (const name of roots) visit("", name);
  while (queue.length) {
    const at = queue.shift()!;
    const e = packages[at];
    for (const deps of [e.dependencies, e.optionalDependencies, e.peerDependencies])
      for (const name of Object.keys(deps ?? {})) visit(at, name);
  }
  return [...seen];
}

/**
 * The measurement of the enclave's code in the checkout at `repoRoot`: SHA-256 over this listing (UTF-8,
 * every line ending in \n, lines sorted by byte order within each part):
 *   `file <path> <sha256 of the file's bytes>` for every regular file under enclave/ (path relative to the
 *     repository root, with /), then
 *   `dep <package-lock path> <version> <integrity>` for every package the enclave's files import
 *     (bare specifiers of import/require/import()) and every package those depend on, as package-lock.json
 *     resolves them (a missing integrity is written as "-").
 */
export function measureEnclave(repoRoot: string): Measurement {
  const enclaveDir = path.join(repoRoot, "enclave");
  const files = filesUnder(enclaveDir, "enclave").sort();
  const sources: string[] = [];
  const lines: string[] = [];
  for (const f of files) {
    const bytes = fs.readFileSync(path.join(repoRoot, f));
    if (/\.(ts|js|mjs|cjs)$/.test(f)) sources.push(bytes.toString("utf8"));
    lines.push(`file ${f} ${sha256(bytes)}`);
  }
  const lock = JSON.parse(fs.readFileSync(path.join(repoRoot, "package-lock.json"), "utf8")) as {
    packages?: Record<string, LockEntry>;
  };
  const packages = lock.packages ?? {};
  const deps = dependencyClosure(packages, importedPackages(sources)).sort();
  for (const d of deps) lines.push(`dep ${d} ${packages[d].version ?? "-"} ${packages[d].integrity ?? "-"}`);
  const listing = lines.map((l) => l + "\n").join("");
  return { measurement: "0x" + sha256(listing), listing };
}
