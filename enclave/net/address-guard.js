"use strict";
/**
 * Which network addresses user-supplied URLs may reach (SSRF protection). Plain CommonJS so that both
 * the executor's worker threads (which start without ts-node) and TypeScript code (address-guard.d.ts)
 * can use it; actions' fetch and outgoing webhooks both use it.
 *
 * IPv4: an address is "public" unless it is in an entry of the IANA IPv4 Special-Purpose Address
 * Registry (loopback, private, shared/carrier-grade NAT, link-local with the cloud metadata endpoints,
 * documentation, benchmarking, the IETF protocol assignments, AS112, AMT, reserved, broadcast) or in
 * multicast. Entries the registry marks globally reachable (AS112, AMT, the PCP and TURN anycasts) are
 * refused too: none is a place a webhook or an action's fetch has any business going.
 *
 * IPv6: only global unicast (2000::/3) can be public, and within it every entry of the IANA IPv6
 * Special-Purpose Address Registry is refused (the IETF protocol assignments 2001::/23 with Teredo,
 * documentation 2001:db8::/32 and 3fff::/20, 6to4 2002::/16, AS112 2620:4f:8000::/48). Outside
 * 2000::/3 nothing is public unless proven so, and two forms are: an IPv4-mapped address
 * (::ffff:a.b.c.d) and the well-known NAT64 prefix (64:ff9b::/96) are judged by the IPv4 address they
 * embed, so `::ffff:127.0.0.1` is loopback and `64:ff9b::808:808` is 8.8.8.8. Everything else is
 * refused: IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d), local-use NAT64
 * (64:ff9b:1::/48), discard-only, unique local, link-local, site-local, multicast, unassigned space. A
 * network that translates one of these prefixes would carry the connection to an address the check
 * never saw. 6to4 and Teredo embed an IPv4 address too, but of a relay's choosing: refused whole.
 *
 * The check must be made on the address actually connected to, after DNS resolution (guarded-request.js
 * resolves once and connects to that very address): checking a host name and letting the connection
 * resolve it again would let a name that changes its answer (DNS rebinding) slip through.
 */
const net = require("node:net");

/**
 * [category, first address, prefix length] of every non-public IPv4 range: the IANA IPv4
 * Special-Purpose Address Registry (each entry, or a wider range that holds it) and multicast.
 */
const IPV4_RANGES = [
  ["unspecified", "0.0.0.0", 8], // "this network" (RFC 791), with 0.0.0.0/32 "this host"
  ["private", "10.0.0.0", 8], // private-use (RFC 1918)
  ["private", "100.64.0.0", 10], // shared address space, carrier-grade NAT (also Alibaba's metadata 100.100.100.200)
  ["loopback", "127.0.0.0", 8],
  ["link-local", "169.254.0.0", 16], // includes the metadata endpoint 169.254.169.254
  ["private", "172.16.0.0", 12], // private-use (RFC 1918)
  ["reserved", "192.0.0.0", 24], // IETF protocol assignments (service continuity, dummy, PCP/TURN anycast, NAT64 discovery)
  ["reserved", "192.0.2.0", 24], // documentation (TEST-NET-1)
  ["reserved", "192.31.196.0", 24], // AS112-v4
  ["reserved", "192.52.193.0", 24], // AMT
  ["reserved", "192.88.99.0", 24], // deprecated 6to4 relay anycast
  ["private", "192.168.0.0", 16], // private-use (RFC 1918)
  ["reserved", "192.175.48.0", 24], // direct delegation AS112 service
  ["reserved", "198.18.0.0", 15], // benchmarking
  ["reserved", "198.51.100.0", 24], // documentation (TEST-NET-2)
  ["reserved", "203.0.113.0", 24], // documentation (TEST-NET-3)
  ["multicast", "224.0.0.0", 4],
  ["reserved", "240.0.0.0", 4], // reserved, includes the limited broadcast 255.255.255.255
];
/** Public addresses that are nevertheless metadata services. */
const IPV4_METADATA = ["168.63.129.16"]; // Azure wire server

/**
 * Non-public IPv6 ranges. Inside 2000::/3: the IANA IPv6 Special-Purpose Address Registry's entries
 * there. Outside it, the categories of what is known (everything else outside is "reserved").
 */
const IPV6_RANGES = [
  ["unspecified", "::", 128],
  ["loopback", "::1", 128],
  ["reserved", "::ffff:0:0:0", 96], // IPv4-translated (SIIT, RFC 2765): translated to an unchecked IPv4
  ["private", "64:ff9b:1::", 48], // local-use IPv4/IPv6 translation (RFC 8215): the network's own mapping
  ["reserved", "100::", 64], // discard-only
  ["reserved", "2001::", 23], // IETF protocol assignments (Teredo 2001::/32, benchmarking, AMT, AS112, ORCHIDv2, DETs, …)
  ["reserved", "2001:db8::", 32], // documentation
  ["reserved", "2002::", 16], // 6to4: embeds an IPv4 address of a relay's choosing
  ["reserved", "2620:4f:8000::", 48], // direct delegation AS112 service
  ["reserved", "3fff::", 20], // documentation (RFC 9637)
  ["private", "fc00::", 7], // unique local (AWS metadata fd00:ec2::254 is here)
  ["link-local", "fe80::", 10],
  ["private", "fec0::", 10], // deprecated site-local
  ["multicast", "ff00::", 8],
];

function buildLists(v4, v6) {
  const lists = new Map();
  const add = (category, address, prefix, family) => {
    if (!lists.has(category)) lists.set(category, new net.BlockList());
    lists.get(category).addSubnet(address, prefix, family);
  };
  for (const [c, a, p] of v4) add(c, a, p, "ipv4");
  for (const [c, a, p] of v6) add(c, a, p, "ipv6");
  return lists;
}

const CATEGORY_LISTS = buildLists(IPV4_RANGES, IPV6_RANGES);

/** The 16 bytes of an IPv6 address in any textual form (net.isIPv6 must have accepted it). */
function ipv6Bytes(address) {
  let text = address.split("%")[0]; // zone index
  const bytes = new Uint8Array(16);
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = dotted[1].split(".").map(Number);
    const tail = ((v4[0] << 8) | v4[1]).toString(16) + ":" + ((v4[2] << 8) | v4[3]).toString(16);
    text = text.slice(0, -dotted[1].length) + tail;
  }
  const [head, rest] = text.includes("::") ? text.split("::") : [text, null];
  const headParts = head === "" ? [] : head.split(":");
  const restParts = rest === null || rest === "" ? [] : rest.split(":");
  const missing = 8 - headParts.length - restParts.length;
  const groups = [...headParts, ...Array(rest === null ? 0 : missing).fill("0"), ...restParts];
  for (let i = 0; i < 8; i++) {
    const g = parseInt(groups[i], 16);
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  }
  return bytes;
}

/**
 * How an IPv6 address embeds an IPv4 address: "mapped" (::ffff:0:0/96), "nat64" (64:ff9b::/96, the
 * well-known prefix), "compatible" (::/96, deprecated) or null; with that IPv4 address.
 */
function embedding(address) {
  const b = ipv6Bytes(address);
  const zeros = (from, to) => b.slice(from, to).every((x) => x === 0);
  const v4 = `${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return { kind: "mapped", v4 };
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12))
    return { kind: "nat64", v4 };
  // ::/128 and ::1/128 are the unspecified and loopback addresses, not IPv4-compatible ones.
  if (zeros(0, 12) && !(b[12] === 0 && b[13] === 0 && b[14] === 0 && b[15] <= 1))
    return { kind: "compatible", v4 };
  return null;
}

/** The IPv4 address an IPv6 address embeds (mapped, compatible, NAT64), or null. */
function embeddedIPv4(address) {
  const e = embedding(address);
  return e === null ? null : e.v4;
}

function classifyIPv4(address) {
  if (IPV4_METADATA.includes(address) || address === "169.254.169.254") return "metadata";
  for (const [category, list] of CATEGORY_LISTS) {
    if (list.check(address, "ipv4")) return category;
  }
  return "public";
}

/** Whether an IPv6 address is in global unicast, 2000::/3. */
function isGlobalUnicast(address) {
  return (ipv6Bytes(address)[0] & 0xe0) === 0x20;
}

/**
 * The category of an IP address: "public", or why it is not ("loopback", "private", "link-local",
 * "metadata", "multicast", "reserved", "unspecified"). Throws a TypeError for a non-IP string.
 */
function classifyAddress(address) {
  const family = net.isIP(address);
  if (family === 0) throw new TypeError(`not an IP address: ${address}`);
  if (family === 4) return classifyIPv4(address);
  const e = embedding(address);
  if (e !== null) {
    const v4 = classifyIPv4(e.v4);
    // Mapped and well-known NAT64 addresses reach exactly their IPv4 address; a deprecated
    // IPv4-compatible one is refused whatever it embeds (named after it when that is not public).
    if (e.kind !== "compatible" || v4 !== "public") return v4;
    return "reserved";
  }
  const bare = address.split("%")[0];
  for (const [category, list] of CATEGORY_LISTS) {
    if (list.check(bare, "ipv6")) return category;
  }
  // Outside global unicast nothing else is proven public.
  return isGlobalUnicast(bare) ? "public" : "reserved";
}

/**
 * An operator's exceptions: IP addresses or CIDR ranges (`127.0.0.1`, `10.0.0.0/8`, `::1`, `fd00::/8`)
 * that may be reached although they are not public. Throws a TypeError for a malformed entry.
 */
function parseAllowList(entries) {
  const list = new net.BlockList();
  for (const entry of entries) {
    if (typeof entry !== "string") throw new TypeError("allowed addresses must be strings");
    const [address, prefixText, extra] = entry.split("/");
    const family = net.isIP(address);
    const prefix = prefixText === undefined ? (family === 4 ? 32 : 128) : Number(prefixText);
    const max = family === 4 ? 32 : 128;
    if (family === 0 || extra !== undefined || !Number.isInteger(prefix) || prefix < 0 || prefix > max) {
      throw new TypeError(`not an IP address or CIDR range: ${entry}`);
    }
    list.addSubnet(address, prefix, family === 4 ? "ipv4" : "ipv6");
  }
  return list;
}

/**
 * A guard: `permits(address)` is true for public addresses and for those the operator allowed;
 * `reason(address)` is the category that refused it (for error messages).
 */
function makeAddressGuard(allowed = []) {
  const allowList = parseAllowList(allowed);
  const allowedByOperator = (address) => {
    const family = net.isIP(address);
    if (family === 0) return false;
    if (family === 6) {
      // An exception for an IPv4 address also covers the IPv6 forms that reach exactly it.
      const e = embedding(address);
      if (e !== null && e.kind !== "compatible" && allowList.check(e.v4, "ipv4")) return true;
      return allowList.check(address.split("%")[0], "ipv6");
    }
    return allowList.check(address, "ipv4");
  };
  return Object.freeze({
    permits(address) {
      return classifyAddress(address) === "public" || allowedByOperator(address);
    },
    reason(address) {
      return classifyAddress(address);
    },
  });
}

module.exports = { classifyAddress, makeAddressGuard, parseAllowList, embeddedIPv4 };
