/**
 * Which endpoint URLs may be registered (SSRF, docs/webhooks.md "Where deliveries may go"): https
 * only (http too when the operator allowed non-public addresses, i.e. on a private network or in
 * tests), no credentials in the URL, and a host whose every address the address guard permits. The
 * same guard is asked again at each delivery, on the address the connection actually uses, because a
 * name may resolve differently later (DNS rebinding).
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import type { AddressGuard } from "../../enclave";
import { ApiError } from "../errors";

export const MAX_URL_LENGTH = 2_048;

export interface UrlPolicy {
  guard: AddressGuard;
  /** http:// accepted besides https:// (only when the operator allowed non-public addresses). */
  allowHttp: boolean;
  /** Name resolution (injectable for tests; default the system resolver). */
  resolve?: (host: string) => Promise<Array<{ address: string }>>;
}

function invalidUrl(message: string): ApiError {
  return new ApiError("webhook_url_invalid", message, { details: { field: "url" } });
}

/** The URL as it will be stored, or a typed refusal. */
export async function checkEndpointUrl(raw: string, policy: UrlPolicy): Promise<string> {
  if (raw.length > MAX_URL_LENGTH) throw invalidUrl(`\`url\` is longer than ${MAX_URL_LENGTH} characters.`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidUrl("`url` is not an absolute URL (e.g. https://example.com/sigil-webhooks).");
  }
  const schemes = policy.allowHttp ? ["https:", "http:"] : ["https:"];
  if (!schemes.includes(url.protocol))
    throw invalidUrl(
      policy.allowHttp
        ? "`url` must start with https:// or http://."
        : "`url` must start with https:// (plain http is accepted only where the operator allows private addresses).",
    );
  if (url.username !== "" || url.password !== "")
    throw invalidUrl(
      "`url` must not hold a user name or password; authenticate deliveries by their signature.",
    );
  if (url.hash !== "") throw invalidUrl("`url` must not hold a #fragment.");
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  const addresses = isIP(host) !== 0 ? [host] : await resolveAll(host, policy.resolve ?? defaultResolve);
  for (const address of addresses) {
    if (!policy.guard.permits(address))
      throw new ApiError(
        "webhook_url_refused",
        `\`url\`'s host ${url.host} resolves to ${address}, a ${policy.guard.reason(address)} address; webhooks are delivered to public addresses only.`,
        { details: { field: "url", address, category: policy.guard.reason(address) } },
      );
  }
  return url.toString();
}

async function defaultResolve(host: string): Promise<Array<{ address: string }>> {
  return lookup(host, { all: true, verbatim: true });
}

async function resolveAll(
  host: string,
  resolve: (host: string) => Promise<Array<{ address: string }>>,
): Promise<string[]> {
  let found: Array<{ address: string }>;
  try {
    found = await resolve(host);
  } catch {
    throw invalidUrl(`\`url\`'s host ${host} does not resolve.`);
  }
  if (found.length === 0) throw invalidUrl(`\`url\`'s host ${host} does not resolve.`);
  return found.map((a) => a.address);
}
