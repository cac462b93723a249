/**
 * What `fetch` may reach in an action (docs/actions.md, "fetch"). The default is the reference
 * runtime's: any host, but (unlike the reference) only public addresses; loopback, private, link-local
 * and metadata addresses need the operator's explicit exception.
 */
import { parseAllowList } from "../net/address-guard";

export interface FetchPolicy {
  /**
   * If present and non-empty, only these hosts: `api.example.com` (that host on the scheme's default
   * port only) or `host:port` (exactly that port). Absent: any host.
   */
  allowHosts?: string[];
  /**
   * IP addresses or CIDR ranges (`127.0.0.1`, `10.0.0.0/8`, `::1`) that may be reached although they are
   * not public. Checked on the address actually connected to, after DNS resolution.
   */
  allowAddresses?: string[];
}

/** The executor-wide policy merged with a run's (the run's fields win); false disables fetch. */
export function mergeFetchPolicy(
  base: FetchPolicy | false,
  run: FetchPolicy | false | undefined,
): FetchPolicy | null {
  if (run === false) return null;
  if (run === undefined) return base === false ? null : base;
  return { ...(base === false ? {} : base), ...run };
}

/** A malformed policy is a caller bug: TypeError, with the same wording as before for allowHosts. */
export function checkFetchPolicy(policy: FetchPolicy | false | undefined, where: string): void {
  if (policy === undefined || policy === false) return;
  if (typeof policy !== "object" || policy === null)
    throw new TypeError(`${where}: fetch must be an object or false`);
  const hosts = policy.allowHosts;
  if (
    hosts !== undefined &&
    (!Array.isArray(hosts) || !hosts.every((h) => typeof h === "string" && h !== ""))
  ) {
    throw new TypeError(`${where}: fetch.allowHosts must be an array of host names`);
  }
  const addresses = policy.allowAddresses;
  if (addresses !== undefined) {
    if (!Array.isArray(addresses)) throw new TypeError(`${where}: fetch.allowAddresses must be an array`);
    try {
      parseAllowList(addresses);
    } catch (e) {
      throw new TypeError(`${where}: fetch.allowAddresses: ${(e as Error).message}`);
    }
  }
}
