/**
 * The Sigil-Signature header (Stripe's scheme): `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw
 * body>")>`, one v1 per secret that currently signs (two during a rotation's grace period). The key of
 * the HMAC is the whole secret string, `whsec_` included, as UTF-8.
 */
import { createHmac } from "node:crypto";

export const SIGNATURE_HEADER = "Sigil-Signature";

export function signatureHeader(secrets: readonly string[], timestamp: number, rawBody: string): string {
  const parts = [`t=${timestamp}`];
  for (const s of secrets)
    parts.push(`v1=${createHmac("sha256", s).update(`${timestamp}.${rawBody}`).digest("hex")}`);
  return parts.join(",");
}
