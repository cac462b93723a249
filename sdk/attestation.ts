/**
 * verifyAttestation: what a client can check of GET /core/v1/attestation without looking at hardware
 * evidence (docs/enclave.md, "Attestation"): the identity key's signature over the document, the pins it was given
 * (identity, measurement, chain and contract addresses), and the nonce it sent. A failed check throws
 * AttestationError; whether the document is hardware-backed is a field of the result, since `tee: "none"`
 * is an honest answer of a deployment without a TEE, unless the caller requires a TEE.
 *
 * The SDK stands alone (it does not import the service's code), so the canonical JSON is written here
 * too; a test checks that it serialises documents exactly as the service's enclave does.
 */
import { getAddress, verifyMessage } from "ethers";
import type { Answer } from "./types";

export type AttestationDocument = Answer<"/core/v1/attestation", "get">;

export const ATTESTATION_FORMAT = "sigil-attestation/v1";

export type AttestationFailure =
  | "malformed" // not a sigil-attestation/v1 document
  | "bad_signature" // the signature is not the identity key's over this document
  | "identity_mismatch" // signed by another key than the pinned one
  | "measurement_mismatch" // other enclave code than the pinned measurement
  | "nonce_mismatch" // not an answer to this request (replayed, or for someone else)
  | "chain_mismatch" // another chain id or other contract addresses than expected
  | "tee_required" // tee "none", and the caller required a TEE
  // TDX (tdx.ts, verifyTdxAttestation):
  | "quote_missing" // tee "tdx" without a quote
  | "quote_invalid" // not a TDX quote, or Intel's signature chain over it does not verify
  | "collateral_unavailable" // no collateral given and no PCCS named, or the PCCS did not answer
  | "collateral_expired" // the collateral is not valid at the time checked: fetch current collateral
  | "tcb_not_accepted" // the platform's TCB status is not one the caller accepts
  | "report_data_mismatch" // the quote was made for another document (or nonce)
  | "event_log_mismatch" // the event log does not replay to the quote's RTMR3, or is malformed
  | "compose_hash_mismatch" // another app-compose (so other code) than the one expected
  | "app_id_mismatch" // another dstack app (so another root key and governance) than the one expected
  | "tdx_measurement_mismatch"; // MRTD/RTMR0-2 (the OS image) other than expected

export class AttestationError extends Error {
  override name = "AttestationError";
  constructor(
    readonly reason: AttestationFailure,
    message: string,
  ) {
    super(message);
  }
}

export interface VerifyAttestationOptions {
  /** The measurement you computed from the checkout you reviewed (0x + 64 hex). */
  expectedMeasurement?: string;
  /** The identity address you pinned (first use, or published by the operator). */
  expectedIdentity?: string;
  /** The nonce you sent as ?nonce=; the document must echo it. */
  nonce?: string;
  expectedChainId?: number;
  expectedRegistry?: string;
  expectedForwarder?: string;
  /** Throw tee_required unless the document claims a TEE (`tee` other than "none"). */
  requireTee?: boolean;
}

export interface VerifiedAttestation {
  /** The identity key that signed, checksummed: pin it. */
  identity: string;
  measurement: string;
  tee: AttestationDocument["tee"];
  /**
   * Always false from this function, which does not look at the quote: verifyTdxAttestation (tdx.ts)
   * checks a "tdx" document's quote against Intel's roots; "none" has no hardware behind it at all.
   */
  hardwareBacked: false;
  /** What the document does not prove, in words. */
  caveats: string[];
}

/** JSON with sorted object keys and no whitespace: the bytes the identity key signs. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError("canonicalJson: numbers must be finite");
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return "[" + value.map(canonicalJson).join(",") + "]";
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return "{" + entries.map(([k, v]) => JSON.stringify(k) + ":" + canonicalJson(v)).join(",") + "}";
  }
  throw new TypeError(`canonicalJson: ${typeof value} is not a JSON value`);
}

const sameAddress = (a: unknown, b: string) => {
  try {
    return typeof a === "string" && getAddress(a) === getAddress(b);
  } catch {
    return false;
  }
};

export function verifyAttestation(
  doc: AttestationDocument,
  opts: VerifyAttestationOptions = {},
): VerifiedAttestation {
  if (
    doc === null ||
    typeof doc !== "object" ||
    doc.format !== ATTESTATION_FORMAT ||
    typeof doc.signature !== "string" ||
    typeof doc.identity?.address !== "string"
  )
    throw new AttestationError("malformed", "Not a sigil-attestation/v1 document.");
  const { signature, ...fields } = doc;
  let signer: string;
  try {
    signer = verifyMessage(canonicalJson(fields), signature);
  } catch {
    throw new AttestationError("bad_signature", "The signature does not decode.");
  }
  if (!sameAddress(doc.identity.address, signer))
    throw new AttestationError(
      "bad_signature",
      "The document was not signed by the identity it names (tampered with, or forged).",
    );
  if (opts.expectedIdentity !== undefined && !sameAddress(signer, opts.expectedIdentity))
    throw new AttestationError(
      "identity_mismatch",
      `Signed by ${signer}, not by the pinned identity ${opts.expectedIdentity}.`,
    );
  if (
    opts.expectedMeasurement !== undefined &&
    doc.measurement.toLowerCase() !== opts.expectedMeasurement.toLowerCase()
  )
    throw new AttestationError(
      "measurement_mismatch",
      `The enclave measures ${doc.measurement}, not ${opts.expectedMeasurement}.`,
    );
  if (opts.nonce !== undefined && doc.nonce !== opts.nonce)
    throw new AttestationError("nonce_mismatch", "The document does not echo the nonce sent.");
  if (opts.expectedChainId !== undefined && doc.chain_id !== opts.expectedChainId)
    throw new AttestationError("chain_mismatch", `Chain ${doc.chain_id}, not ${opts.expectedChainId}.`);
  for (const [field, expected] of [
    ["registry_address", opts.expectedRegistry],
    ["forwarder_address", opts.expectedForwarder],
  ] as const) {
    if (expected !== undefined && !sameAddress(doc[field], expected))
      throw new AttestationError("chain_mismatch", `${field} is ${doc[field]}, not ${expected}.`);
  }
  if (opts.requireTee && doc.tee === "none")
    throw new AttestationError("tee_required", 'The deployment runs without a TEE (tee: "none").');
  const caveats =
    doc.tee === "none"
      ? [
          'tee is "none": nothing but the operator vouches that this measurement is what runs, or that the root key is held only by it.',
        ]
      : [`tee is "${doc.tee}": this function does not check the quote; verifyTdxAttestation does.`];
  return { identity: signer, measurement: doc.measurement, tee: doc.tee, hardwareBacked: false, caveats };
}
