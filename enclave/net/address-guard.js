"use strict";
/**
 * Which network addresses user-supplied URLs may reach (SSRF protection). Plain CommonJS so that both
 * the executor's worker threads (which start without ts-node) and TypeScript code (address-guard.d.ts)
 * can use it; the action runtime's fetch uses it today, outgoing webhooks are meant to reuse it.
 *
 * An address is "public" unless it is in one of the ranges below: loopback, private (RFC 1918, unique
 * local), link-local (which holds the cloud metadata endpoints 169.254.169.254 and fd00:ec2::254 is in
 * fc00::/7), carrier-grade NAT, documentation, benchmarking, multicast, reserved and unspecified ranges.
 * IPv6 forms that embed an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`,
 * NAT64 `64:ff9b::/96`) are judged by that IPv4 address, so `::ffff:127.0.0.1` is loopback.
 *
 * The check must be made on the address actually connected to, after DNS resolution (guarded-request.js
 * resolves once and connects to that very address): checking a host name and letting the connection
 * resolve it again would let a name that changes its answer (DNS rebinding) slip through.
 */
const net = require("node:net");

/** [category, first address, prefix length] of every non-public IPv4 range. */
const IPV4_RANGES = [
  ["unspecified", "0.0.0.0", 8],
  ["private", "10.0.0.0", 8],
  ["private", "100.64.0.0", 10], // carrier-grade NAT (also Alibaba's metadata 100.100.100.200)
  ["loopback", "127.0.0.0", 8],
  ["link-local", "169.254.0.0", 16], // includes the metadata endpoint 169.254.169.254
  ["private", "172.16.0.0", 12],
  ["reserved", "192.0.0.0", 24],
  ["reserved", "192.0.2.0", 24],
  ["reserved", "192.88.99.0", 24],
  ["private", "192.168.0.0", 16],
  ["reserved", "198.18.0.0", 15],
  ["reserved", "198.51.100.0", 24],
  ["reserved", "203.0.113.0", 24],
  ["multicast", "224.0.0.0", 4],
  ["reserved", "240.0.0.0", 4], // includes 255.255.255.255
];
/** Public addresses that are nevertheless metadata services. */
const IPV4_METADATA = ["168.63.129.16"]; // Azure wire server

const IPV6_RANGES = [
  ["unspecified", "::", 128],
  ["loopback", "::1", 128],
  ["reserved", "100::", 64], // discard-only
  ["reserved", "2001::", 23], // IETF protocol assignments (Teredo, ORCHID, …)
  ["reserved", "2001:db8::", 32], // documentation
  ["reserved", "2002::", 16], // 6to4: embeds an IPv4 address of unknown kind
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

/** The IPv4 address an IPv6 address embeds (mapped, compatible, NAT64), or null. */
function embeddedIPv4(address) {
  const b = ipv6Bytes(address);
  const zeros = (from, to) => b.slice(from, to).every((x) => x === 0);
  const mapped = zeros(0, 10) && b[10] === 0xff && b[11] === 0xff;
  const compatible = zeros(0, 12) && !(b[12] === 0 && b[13] === 0 && b[14] === 0 && b[15] <= 1);
  const nat64 = b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12);
  if (!mapped && !compatible && !nat64) return null;
  return `${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
}

/**
 * The category of an IP address: "public", or why it is not ("loopback", "private", "link-local",
 * "metadata", "multicast", "reserved", "unspecified"). Throws a TypeError for a non-IP string.
 */
function classifyAddress(address) {
  const family = net.isIP(address);
  if (family === 0) throw new TypeError(`not an IP address: ${address}`);
  if (family === 6) {
    const v4 = embeddedIPv4(address);
    if (v4 !== null) return classifyAddress(v4);
  }
  if (family === 4 && IPV4_METADATA.includes(address)) return "metadata";
  if (family === 4 && address === "169.254.169.254") return "metadata";
  const type = family === 4 ? "ipv4" : "ipv6";
  const bare = family === 6 ? address.split("%")[0] : address;
  for (const [category, list] of CATEGORY_LISTS) {
    if (list.check(bare, type)) return category;
  }
  return "public";
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
      const v4 = embeddedIPv4(address);
      if (v4 !== null && allowList.check(v4, "ipv4")) return true;
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
