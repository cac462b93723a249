/**
 * GET /core/v1/attestation (public): which enclave code this deployment runs (the measurement), which root
 * key stands behind it (the identity), on which chain and contracts, signed by the identity key so a client
 * can pin it (docs/enclave.md, "Attestation"). The measurement is computed once, at start.
 *
 * `tee` is "none" here: this process runs on an ordinary machine, so there is no hardware quote to give,
 * and none is ever faked (`quote: null`). A TDX or Nitro deployment is where "tdx"/"nitro" and a quote
 * binding this document would come from.
 */
import * as path from "node:path";
import { Router } from "express";
import { ATTESTATION_FORMAT, measureEnclave } from "../../enclave";
import { handler, type RelayerContext } from "../context";
import { ApiError } from "../errors";
import { version as serviceVersion } from "../../package.json";

const NONCE = /^[A-Za-z0-9._:-]{1,128}$/;

function readNonce(query: Record<string, unknown>): string | null {
  const v = query.nonce;
  if (v === undefined) return null;
  if (typeof v !== "string" || !NONCE.test(v)) {
    throw new ApiError(
      400,
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
        tee: "none",
        measurement,
        identity: { address: identity.address, public_key: identity.publicKey },
        chain_id: ctx.chainId,
        registry_address: ctx.cfg.registryAddress,
        forwarder_address: ctx.cfg.forwarderAddress,
        service_version: serviceVersion,
        timestamp: Math.floor(Date.now() / 1000),
        nonce: readNonce(req.query as Record<string, unknown>),
        quote: null,
      };
      return { body: { ...fields, signature: ctx.enclave.signAttestation(fields) } };
    }),
  );

  return r;
}
