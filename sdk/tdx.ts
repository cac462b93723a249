/**
 * The TDX half of attestation (docs/enclave.md, "Verifying a TDX attestation"): a TD quote is checked in
 * three independent steps, each with its own failure reason, so a client learns exactly what did not hold:
 *
 *  1. verifyTdxQuote: Intel's signature chain and the TCB status, with @phala/dcap-qvl against collateral
 *     the caller supplies or fetches from a PCCS it names (never from a default server behind its back);
 *  2. checkTdxBinding: the quote's REPORTDATA is SHA-512 of the document's bound fields (so the quote
 *     vouches for this very document, nonce included), the event log replays to the quote's RTMR3, and
 *     the compose hash it records is the document's and the one the caller expects;
 *  3. the identity signature and pins of verifyAttestation (attestation.ts).
 *
 * verifyTdxAttestation does all three. The SDK stands alone: nothing here imports the service's code; a test
 * checks that tdxReportData agrees with the enclave's attestationReportData.
 */
import { createHash } from "node:crypto";
// Types only at the top: the verifier itself is loaded on first use (below), so a client that never checks a
// TDX quote (the dashboard's first page) does not carry it.
import type { Collateral, TcbStatus, verify as DcapVerify } from "@phala/dcap-qvl";
import {
  AttestationError,
  canonicalJson,
  verifyAttestation,
  type AttestationDocument,
  type VerifyAttestationOptions,
  type VerifiedAttestation,
} from "./attestation";

export type { Collateral as TdxCollateral, TcbStatus } from "@phala/dcap-qvl";

/** Fields the quote does not bind: the signature (made after the quote) and the evidence itself. */
const UNBOUND_FIELDS = new Set(["signature", "quote", "event_log"]);
/** dstack's event type for runtime events, which it extends into RTMR3. */
const DSTACK_RUNTIME_EVENT_TYPE = 0x08000001;
const HEX = /^(0x)?([0-9a-fA-F]{2})*$/;

/** 0x + 128 hex: the REPORTDATA a quote over this document carries (SHA-512 of its bound fields). */
export function tdxReportData(doc: Record<string, unknown>): string {
  const bound = Object.fromEntries(Object.entries(doc).filter(([k]) => !UNBOUND_FIELDS.has(k)));
  return "0x" + createHash("sha512").update(canonicalJson(bound), "utf8").digest("hex");
}

/** The measurement registers and report data of a TD quote (hex, 0x-prefixed). */
export interface TdReport {
  mrTd: string;
  rtmr0: string;
  rtmr1: string;
  rtmr2: string;
  rtmr3: string;
  reportData: string;
}

const HEADER = 48;
const hexAt = (q: Uint8Array, offset: number, length: number) =>
  "0x" + Buffer.from(q.subarray(offset, offset + length)).toString("hex");

/**
 * Reads the TD report of a TDX (v4/v5) quote at its fixed offsets: MRTD at 136, RTMR0–3 from 328 and
 * REPORTDATA at 520 of the report that follows the 48-byte header. Layout only, no trust: the numbers mean
 * something once verifyTdxQuote has checked the quote's signature.
 */
export function parseTdReport(quote: Uint8Array): TdReport {
  const view = Buffer.from(quote.buffer, quote.byteOffset, quote.byteLength);
  if (quote.length < HEADER + 584)
    throw new AttestationError("quote_invalid", "The quote is too short to hold a TD report.");
  const version = view.readUInt16LE(0);
  const teeType = view.readUInt32LE(4);
  if ((version !== 4 && version !== 5) || teeType !== 0x81)
    throw new AttestationError("quote_invalid", `Not a TDX quote (version ${version}, TEE type ${teeType}).`);
  // A v5 quote has a 6-byte body descriptor (type u16, size u32) before the report.
  const body = version === 5 ? HEADER + 6 : HEADER;
  return {
    mrTd: hexAt(quote, body + 136, 48),
    rtmr0: hexAt(quote, body + 328, 48),
    rtmr1: hexAt(quote, body + 376, 48),
    rtmr2: hexAt(quote, body + 424, 48),
    rtmr3: hexAt(quote, body + 472, 48),
    reportData: hexAt(quote, body + 520, 64),
  };
}

export function quoteBytes(quote: unknown): Uint8Array {
  if (typeof quote !== "string" || quote.length < 4 || !HEX.test(quote))
    throw new AttestationError("quote_missing", "The document carries no TD quote.");
  return Uint8Array.from(Buffer.from(quote.replace(/^0x/i, ""), "hex"));
}

export interface VerifyTdxQuoteOptions {
  /** Intel's collateral for this quote (e.g. saved earlier from a PCCS). Takes precedence over pccsUrl. */
  collateral?: Collateral;
  /**
   * A PCCS (or Intel's PCS, https://api.trustedservices.intel.com/sgx/certification/v4/) to fetch the
   * collateral from. Never defaulted: with neither this nor `collateral` the check fails
   * (collateral_unavailable), so no request leaves the process unless the caller named its destination.
   */
  pccsUrl?: string;
  /** The time to check the collateral's validity at (unix seconds or a Date); default now. */
  now?: number | Date;
  /** TCB statuses accepted; default only "UpToDate". */
  acceptedTcbStatuses?: TcbStatus[];
}

export interface VerifiedTdxQuote {
  tcbStatus: TcbStatus;
  advisoryIds: string[];
  report: TdReport;
}

/** Step 1: Intel's signatures over the quote, the collateral's validity at `now`, the TCB status. */
export async function verifyTdxQuote(
  quote: Uint8Array,
  opts: VerifyTdxQuoteOptions = {},
): Promise<VerifiedTdxQuote> {
  const { getCollateral, verify: dcapVerify } = await import("@phala/dcap-qvl");
  let collateral = opts.collateral;
  if (collateral === undefined) {
    if (opts.pccsUrl === undefined)
      throw new AttestationError(
        "collateral_unavailable",
        "No collateral to check the quote against: pass `collateral`, or name a PCCS in `pccsUrl`.",
      );
    try {
      collateral = await getCollateral(opts.pccsUrl, quote);
    } catch (e) {
      throw new AttestationError(
        "collateral_unavailable",
        `Could not fetch the collateral from ${opts.pccsUrl}: ${(e as Error).message}`,
      );
    }
  }
  const now =
    opts.now instanceof Date
      ? Math.floor(opts.now.getTime() / 1000)
      : (opts.now ?? Math.floor(Date.now() / 1000));
  let result: ReturnType<typeof DcapVerify>;
  try {
    result = dcapVerify(quote, collateral, now);
  } catch (e) {
    const message = (e as Error).message ?? String(e);
    if (/expired|issue date is in the future/i.test(message))
      throw new AttestationError(
        "collateral_expired",
        `The collateral is not valid at ${new Date(now * 1000).toISOString()}: ${message}. Fetch current collateral.`,
      );
    if (/TCB status is invalid/i.test(message))
      throw new AttestationError("tcb_not_accepted", `Intel rates this platform's TCB invalid: ${message}.`);
    throw new AttestationError(
      "quote_invalid",
      `The quote does not verify against Intel's roots: ${message}.`,
    );
  }
  const accepted = opts.acceptedTcbStatuses ?? ["UpToDate"];
  if (!accepted.includes(result.status))
    throw new AttestationError(
      "tcb_not_accepted",
      `The platform's TCB status is ${result.status}` +
        (result.advisory_ids.length ? ` (advisories ${result.advisory_ids.join(", ")})` : "") +
        `; accepted: ${accepted.join(", ")}.`,
    );
  return { tcbStatus: result.status, advisoryIds: [...result.advisory_ids], report: parseTdReport(quote) };
}

interface DstackEvent {
  imr: number;
  event_type: number;
  digest: string;
  event: string;
  event_payload: string;
}

function parseEventLog(text: unknown): DstackEvent[] {
  let events: unknown;
  try {
    events = typeof text === "string" ? JSON.parse(text) : undefined;
  } catch {
    events = undefined;
  }
  const ok =
    Array.isArray(events) &&
    events.every(
      (e) =>
        e !== null &&
        typeof e === "object" &&
        Number.isInteger(e.imr) &&
        typeof e.digest === "string" &&
        HEX.test(e.digest) &&
        typeof e.event === "string" &&
        typeof e.event_payload === "string" &&
        HEX.test(e.event_payload),
    );
  if (!ok) throw new AttestationError("event_log_mismatch", "The event log is missing or malformed.");
  return events as DstackEvent[];
}

const sha384 = (...parts: Buffer[]) => createHash("sha384").update(Buffer.concat(parts)).digest();

/** RTMR3 as the event log extends it: mr = SHA-384(mr ‖ digest), from 48 zero bytes. */
function replayRtmr3(events: DstackEvent[]): string {
  let mr = Buffer.alloc(48);
  for (const e of events.filter((x) => x.imr === 3)) {
    const d = Buffer.from(e.digest, "hex");
    mr = sha384(mr, Buffer.concat([d, Buffer.alloc(Math.max(0, 48 - d.length))]));
  }
  return "0x" + mr.toString("hex");
}

/** dstack's runtime event digest: SHA-384(u32le(type) ‖ ":" ‖ name ‖ ":" ‖ payload). */
function runtimeEventDigest(name: string, payloadHex: string): string {
  const type = Buffer.alloc(4);
  type.writeUInt32LE(DSTACK_RUNTIME_EVENT_TYPE);
  return sha384(
    type,
    Buffer.from(":"),
    Buffer.from(name),
    Buffer.from(":"),
    Buffer.from(payloadHex, "hex"),
  ).toString("hex");
}

const sameHex = (a: unknown, b: unknown) =>
  typeof a === "string" &&
  typeof b === "string" &&
  a.replace(/^0x/i, "").toLowerCase() === b.replace(/^0x/i, "").toLowerCase();

export interface TdxBindingOptions {
  /** The compose hash of the app-compose.json you reviewed (scripts/tee/compose-hash.ts). */
  expectedComposeHash?: string;
  /**
   * The dstack app id you expect (it stays the same across the upgrades its governance approves, as does the
   * root key): checked against the document and the measured app-id event of the event log.
   */
  expectedAppId?: string;
  /** MRTD and RTMR0–2 of the dstack OS image you trust (from its reproducible build). */
  expectedMrTd?: string;
  expectedRtmr0?: string;
  expectedRtmr1?: string;
  expectedRtmr2?: string;
}

/**
 * Step 2, pure: that the (verified) TD report vouches for this document and the expected build, checked in
 * this order: the OS image's registers (MRTD, RTMR0-2) are the ones expected; the REPORTDATA is
 * tdxReportData(doc); the event log replays to RTMR3; its one compose-hash event is well formed and names
 * the document's compose_hash; that compose hash is the one expected; and, when asked, the app id (the
 * measured app-id event, the document's) is the one expected.
 */
export function checkTdxBinding(
  doc: AttestationDocument,
  report: TdReport,
  opts: TdxBindingOptions = {},
): void {
  for (const [name, want, got] of [
    ["MRTD", opts.expectedMrTd, report.mrTd],
    ["RTMR0", opts.expectedRtmr0, report.rtmr0],
    ["RTMR1", opts.expectedRtmr1, report.rtmr1],
    ["RTMR2", opts.expectedRtmr2, report.rtmr2],
  ] as const) {
    if (want !== undefined && !sameHex(want, got))
      throw new AttestationError("tdx_measurement_mismatch", `${name} is ${got}, not ${want}.`);
  }
  if (!sameHex(report.reportData, tdxReportData(doc as unknown as Record<string, unknown>)))
    throw new AttestationError(
      "report_data_mismatch",
      "The quote's report data is not this document's: the quote was made for another document (or nonce).",
    );
  const events = parseEventLog((doc as { event_log?: unknown }).event_log);
  if (!sameHex(replayRtmr3(events), report.rtmr3))
    throw new AttestationError("event_log_mismatch", "The event log does not replay to the quote's RTMR3.");
  const composeEvents = events.filter((e) => e.imr === 3 && e.event === "compose-hash");
  const composeEvent = composeEvents[0];
  if (
    composeEvents.length !== 1 ||
    !sameHex(composeEvent.digest, runtimeEventDigest("compose-hash", composeEvent.event_payload))
  )
    throw new AttestationError(
      "event_log_mismatch",
      "The event log has no single, well-formed compose-hash event.",
    );
  const docHash = (doc as { compose_hash?: unknown }).compose_hash;
  if (!sameHex(composeEvent.event_payload, docHash))
    throw new AttestationError(
      "compose_hash_mismatch",
      `The document names compose hash ${String(docHash)}, the measured event log 0x${composeEvent.event_payload}.`,
    );
  if (opts.expectedComposeHash !== undefined && !sameHex(docHash, opts.expectedComposeHash))
    throw new AttestationError(
      "compose_hash_mismatch",
      `The CVM runs compose hash ${String(docHash)}, not ${opts.expectedComposeHash}.`,
    );
  if (opts.expectedAppId !== undefined) {
    const appEvents = events.filter((e) => e.imr === 3 && e.event === "app-id");
    const measured = appEvents.length === 1 ? appEvents[0] : undefined;
    if (!measured || !sameHex(measured.digest, runtimeEventDigest("app-id", measured.event_payload)))
      throw new AttestationError(
        "event_log_mismatch",
        "The event log has no single, well-formed app-id event.",
      );
    const docAppId = (doc as { app_id?: unknown }).app_id;
    if (!sameHex(measured.event_payload, docAppId) || !sameHex(docAppId, opts.expectedAppId))
      throw new AttestationError(
        "app_id_mismatch",
        `The CVM runs app ${String(docAppId)} (measured 0x${measured.event_payload}), not ${opts.expectedAppId}.`,
      );
  }
}

export type VerifyTdxAttestationOptions = VerifyAttestationOptions &
  VerifyTdxQuoteOptions &
  TdxBindingOptions;

export interface VerifiedTdxAttestation extends Omit<VerifiedAttestation, "hardwareBacked" | "tee"> {
  tee: "tdx";
  hardwareBacked: true;
  tcbStatus: TcbStatus;
  advisoryIds: string[];
  composeHash: string;
  report: TdReport;
}

/**
 * Everything a client checks before trusting a TDX deployment, in one call: the document's signature and
 * pins (verifyAttestation, a TEE required), Intel's signatures and TCB status (verifyTdxQuote), and that
 * the quote binds this document, its nonce and the expected build (checkTdxBinding). Throws
 * AttestationError with the reason of the first check that fails.
 */
export async function verifyTdxAttestation(
  doc: AttestationDocument,
  opts: VerifyTdxAttestationOptions = {},
): Promise<VerifiedTdxAttestation> {
  const base = verifyAttestation(doc, { ...opts, requireTee: true });
  if (doc.tee !== "tdx")
    throw new AttestationError("tee_required", `The document claims tee "${doc.tee}", not "tdx".`);
  const quote = quoteBytes(doc.quote);
  parseTdReport(quote); // a clear "not a TDX quote" before any collateral is fetched
  const verified = await verifyTdxQuote(quote, opts);
  checkTdxBinding(doc, verified.report, opts);
  return {
    identity: base.identity,
    measurement: base.measurement,
    tee: "tdx",
    hardwareBacked: true,
    tcbStatus: verified.tcbStatus,
    advisoryIds: verified.advisoryIds,
    composeHash: String((doc as { compose_hash?: unknown }).compose_hash),
    report: verified.report,
    caveats: [
      "Intel's signature proves this document was quoted inside a TDX trust domain with the registers shown; " +
        "that they are the build you reviewed holds only for the values you passed as expected (compose hash, MRTD, RTMRs).",
      ...(opts.expectedComposeHash === undefined
        ? ["No expectedComposeHash was given: any app-compose, so any code, would have passed."]
        : []),
      ...(verified.tcbStatus !== "UpToDate"
        ? [`The TCB status is ${verified.tcbStatus}: the platform lacks updates Intel has published.`]
        : []),
    ],
  };
}
