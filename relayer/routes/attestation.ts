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
import { Router } from "express";
import { ATTESTATION_FORMAT, isEnclaveError, measureEnclave } from "../../enclave";
import { handler, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { version as serviceVersion } from "../../package.json";

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

export function attestationRoutes(ctx: RelayerContext): Router {
  const r = Router();
  const { measurement } = measureEnclave(path.resolve(__dirname, "..", ".."));
  const identity = ctx.enclave.attestationIdentity();

  r.get(
    "/attestation",
    handler(ctx, async (req) => {
      const fields = {
        format: ATTESTATION_FORMAT,
        measurement,
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
    }),
  );

  return r;
}
