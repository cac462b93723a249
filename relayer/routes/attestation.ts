/**
 * GET /core/v1/attestation (public): which enclave code this deployment runs (the measurement), which root
 * key stands behind it (the identity), on which chain and contracts, signed by the identity key so a client
 * can pin it (docs/enclave.md, "Attestation"). The measurement is computed once, at start.
 *
 * Whether hardware vouches for it is the enclave's to say (its root-key provider): with `file`, `tee` is
 * "none" and `quote` null, since this process runs on an ordinary machine and no quote is ever faked; with
 * `dstack`, `tee` is "tdx" and the document carries a TD quote whose report data binds every other field
 * (the nonce included, so each answer is quoted afresh), the event log and the app's compose hash.
 */
import * as path from "node:path";
import { ATTESTATION_FORMAT, isEnclaveError, measureEnclave } from "../../enclave";
import { type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { version as serviceVersion } from "../../package.json";
import { endpoint } from "./endpoint";
import * as s from "./schemas";

const NONCE = /^[A-Za-z0-9._:-]{1,128}$/;

function readNonce(query: Record<string, unknown>): string | null {
  const v = query.nonce;
  if (v === undefined) return null;
  if (typeof v !== "string" || !NONCE.test(v)) {
    throw new ApiError(
      "invalid_request",
      "`nonce` must be 1 to 128 characters from A-Z a-z 0-9 . _ : - (given once).",
      { details: { field: "nonce" } },
    );
  }
  return v;
}

/** What this checkout's enclave code measures to: hashed once, on the first request that asks. */
let measured: string | undefined;
const enclaveMeasurement = () =>
  (measured ??= measureEnclave(path.resolve(__dirname, "..", "..")).measurement);

const getAttestation = endpoint<RelayerContext>("GET", "/attestation", {
  caller: "public",
  summary:
    "What this deployment runs and which key speaks for it, signed by that key (docs/enclave.md, Attestation)",
  params: [
    {
      name: "nonce",
      in: "query",
      required: false,
      schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,128}$" },
      description: "Echoed in the signed document (freshness)",
    },
  ],
  answer: s.out(
    {
      format: { type: "string", const: "sigil-attestation/v1" },
      tee: { type: "string", enum: ["none", "tdx", "nitro"] },
      measurement: { type: "string", pattern: "^0x[0-9a-f]{64}$" },
      identity: s.out({ address: s.address, public_key: { type: "string", pattern: "^0x04[0-9a-f]{128}$" } }),
      chain_id: s.int(),
      registry_address: s.address,
      forwarder_address: s.address,
      service_version: s.str(),
      timestamp: s.int("Unix seconds"),
      nonce: s.nullable(s.str()),
      quote: s.nullable({
        type: "string",
        pattern: "^0x([0-9a-f]{2})+$",
        description:
          'tee "tdx": the TD quote (hex) whose report data is SHA-512 of the other fields but quote, event_log and signature; null with tee "none"',
      }),
      event_log: s.str(
        "tee \"tdx\" only: the CVM's event log (JSON text), which replays to the quote's RTMRs",
      ),
      compose_hash: {
        type: "string",
        pattern: "^0x[0-9a-f]{64}$",
        description: 'tee "tdx" only: SHA-256 of the dstack app-compose.json this CVM runs',
      },
      app_id: s.str('tee "tdx" only: the dstack app id the KMS derives the root key for'),
      signature: { type: "string", pattern: "^0x[0-9a-f]{130}$" },
    },
    ["event_log", "compose_hash", "app_id"],
  ),
  errors: ["invalid_request"],
  async handle(ctx, req) {
    const identity = ctx.enclave.attestationIdentity();
    const fields = {
      format: ATTESTATION_FORMAT,
      measurement: enclaveMeasurement(),
      identity: { address: identity.address, public_key: identity.publicKey },
      chain_id: ctx.chainId,
      registry_address: ctx.cfg.registryAddress,
      forwarder_address: ctx.cfg.forwarderAddress,
      service_version: serviceVersion,
      timestamp: Math.floor(Date.now() / 1000),
      nonce: readNonce(req.query as Record<string, unknown>),
    };
    try {
      return { body: await ctx.enclave.attest(fields) };
    } catch (err) {
      // The TEE (dstack's guest agent) could not quote: the service is up but cannot prove itself
      // right now. A client must not mistake that for a bug of its own (500) nor get an unquoted document.
      if (isEnclaveError(err) && err.code === "tee_quote_failed")
        throw new ApiError(
          "attestation_unavailable",
          "The TEE did not produce a quote for this attestation.",
          {
            cause: err,
            retryAfter: 5,
          },
        );
      throw err;
    }
  },
});

export const ATTESTATION_ENDPOINTS = [getAttestation];
