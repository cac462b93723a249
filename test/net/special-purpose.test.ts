/**
 * The address guard against the IANA special-purpose address registries (IPv4 and IPv6): every prefix
 * of both is refused, by the guard itself, by webhook URL validation (POST /core/v1/webhooks) and by an
 * action's fetch (POST /core/v1/svc_action), on the real stack. The tables below are the registries'
 * entries, each with its prefix and name, written out here as test data. Around them: the IPv6 rule
 * (nothing outside global unicast 2000::/3 is public unless proven so: IPv4-mapped and the well-known
 * NAT64 prefix are judged by the IPv4 address they embed), and the operator's exceptions.
 */
import { expect } from "chai";
import { isIP } from "node:net";
import { classifyAddress, makeAddressGuard } from "../../enclave";
import { setupAccount, startStack, type Stack } from "../helpers/stack";

/** The IANA IPv4 Special-Purpose Address Registry: [prefix, name]. */
const IANA_IPV4_SPECIAL_PURPOSE: ReadonlyArray<readonly [string, string]> = [
  ["0.0.0.0/8", '"This network"'],
  ["0.0.0.0/32", '"This host on this network"'],
  ["10.0.0.0/8", "Private-Use"],
  ["100.64.0.0/10", "Shared Address Space"],
  ["127.0.0.0/8", "Loopback"],
  ["169.254.0.0/16", "Link Local"],
  ["172.16.0.0/12", "Private-Use"],
  ["192.0.0.0/24", "IETF Protocol Assignments"],
  ["192.0.0.0/29", "IPv4 Service Continuity Prefix"],
  ["192.0.0.8/32", "IPv4 dummy address"],
  ["192.0.0.9/32", "Port Control Protocol Anycast"],
  ["192.0.0.10/32", "Traversal Using Relays around NAT Anycast"],
  ["192.0.0.170/32", "NAT64/DNS64 Discovery"],
  ["192.0.0.171/32", "NAT64/DNS64 Discovery"],
  ["192.0.2.0/24", "Documentation (TEST-NET-1)"],
  ["192.31.196.0/24", "AS112-v4"],
  ["192.52.193.0/24", "AMT"],
  ["192.88.99.0/24", "Deprecated (6to4 Relay Anycast)"],
  ["192.168.0.0/16", "Private-Use"],
  ["192.175.48.0/24", "Direct Delegation AS112 Service"],
  ["198.18.0.0/15", "Benchmarking"],
  ["198.51.100.0/24", "Documentation (TEST-NET-2)"],
  ["203.0.113.0/24", "Documentation (TEST-NET-3)"],
  ["240.0.0.0/4", "Reserved"],
  ["255.255.255.255/32", "Limited Broadcast"],
];

/** The IANA IPv6 Special-Purpose Address Registry: [prefix, name]. */
const IANA_IPV6_SPECIAL_PURPOSE: ReadonlyArray<readonly [string, string]> = [
  ["::1/128", "Loopback Address"],
  ["::/128", "Unspecified Address"],
  ["::ffff:0:0/96", "IPv4-mapped Address"],
  ["64:ff9b::/96", "IPv4-IPv6 Translat."],
  ["64:ff9b:1::/48", "IPv4-IPv6 Translat."],
  ["100::/64", "Discard-Only Address Block"],
  ["100:0:0:1::/64", "Dummy IPv6 Prefix"],
  ["2001::/23", "IETF Protocol Assignments"],
  ["2001::/32", "TEREDO"],
  ["2001:1::1/128", "Port Control Protocol Anycast"],
  ["2001:1::2/128", "Traversal Using Relays around NAT Anycast"],
  ["2001:1::3/128", "DNS-SD Service Registration Protocol Anycast"],
  ["2001:2::/48", "Benchmarking"],
  ["2001:3::/32", "AMT"],
  ["2001:4:112::/48", "AS112-v6"],
  ["2001:10::/28", "Deprecated (previously ORCHID)"],
  ["2001:20::/28", "ORCHIDv2"],
  ["2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix"],
  ["2001:db8::/32", "Documentation"],
  ["2002::/16", "6to4"],
  ["2620:4f:8000::/48", "Direct Delegation AS112 Service"],
  ["3fff::/20", "Documentation"],
  ["5f00::/16", "Segment Routing (SRv6) SIDs"],
  ["fc00::/7", "Unique-Local"],
  ["fe80::/10", "Link-Local Unicast"],
];

/** Prefixes whose addresses embed an IPv4 address they are judged by (so some of them are public). */
const JUDGED_BY_EMBEDDED_IPV4 = new Set(["::ffff:0:0/96", "64:ff9b::/96"]);

function ipv4ToBig(a: string): bigint {
  return a.split(".").reduce((n, o) => (n << 8n) | BigInt(o), 0n);
}
function bigToIpv4(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 255n)).join(".");
}
function ipv6ToBig(a: string): bigint {
  const [head, tail] = a.includes("::") ? a.split("::") : [a, null];
  const h = head === "" ? [] : head.split(":");
  const t = tail === null || tail === "" ? [] : tail.split(":");
  const groups = [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}
function bigToIpv6(n: bigint): string {
  return Array.from({ length: 8 }, (_, i) => ((n >> BigInt(16 * (7 - i))) & 0xffffn).toString(16)).join(":");
}

/** The first, middle and last address of a prefix. */
function samples(prefix: string): string[] {
  const [address, len] = prefix.split("/");
  const v4 = isIP(address) === 4;
  const bits = v4 ? 32 : 128;
  const first = v4 ? ipv4ToBig(address) : ipv6ToBig(address);
  const size = 1n << BigInt(bits - Number(len));
  const points = [...new Set([first, first + size / 2n, first + size - 1n])];
  return points.map((n) => (v4 ? bigToIpv4(n) : bigToIpv6(n)));
}

/** Every registry entry with the addresses tested for it. The embedding prefixes: their ends only. */
const TABLE = [...IANA_IPV4_SPECIAL_PURPOSE, ...IANA_IPV6_SPECIAL_PURPOSE].map(([prefix, name]) => {
  const all = samples(prefix);
  return {
    prefix,
    name,
    addresses: JUDGED_BY_EMBEDDED_IPV4.has(prefix) ? [all[0], all[all.length - 1]] : all,
  };
});

const urlHost = (address: string) => (isIP(address) === 6 ? `[${address}]` : address);

describe("net: the IANA special-purpose registries are refused", function () {
  describe("the guard", function () {
    const guard = makeAddressGuard();
    for (const { prefix, name, addresses } of TABLE)
      it(`refuses ${prefix} (${name}): ${addresses.join(", ")}`, function () {
        expect(addresses.filter((a) => guard.permits(a))).to.deep.equal([]);
      });

    for (const [prefix, name] of IANA_IPV4_SPECIAL_PURPOSE)
      it(`refuses ${prefix} (${name}) embedded in ::ffff:0:0/96 and 64:ff9b::/96`, function () {
        const embedded = samples(prefix).flatMap((v4) => [`::ffff:${v4}`, `64:ff9b::${v4}`]);
        expect(embedded.filter((a) => guard.permits(a))).to.deep.equal([]);
      });

    for (const [address, category] of [
      ["::ffff:0:7f00:1", "reserved"], // IPv4-translated (SIIT) form of 127.0.0.1
      ["::ffff:0:a00:1", "reserved"], // IPv4-translated form of 10.0.0.1
      ["64:ff9b:1::7f00:1", "private"], // local-use NAT64 of 127.0.0.1
      ["64:ff9b:1:ffff::8.8.8.8", "private"], // local-use NAT64, whatever it embeds
      ["::8.8.8.8", "reserved"], // IPv4-compatible (deprecated), even of a public address
      ["4000::1", "reserved"], // unassigned, outside 2000::/3
      ["e000::1", "reserved"],
      ["5f00::1", "reserved"],
    ] as const)
      it(`refuses ${address} (outside 2000::/3, not proven public) as ${category}`, function () {
        expect([guard.permits(address), classifyAddress(address)]).to.deep.equal([false, category]);
      });

    for (const [address, why] of [
      ["2606:4700:4700::1111", "global unicast"],
      ["2a00:1450:4001:80b::200e", "global unicast"],
      ["::ffff:8.8.8.8", "IPv4-mapped 8.8.8.8"],
      ["64:ff9b::808:808", "well-known NAT64 of 8.8.8.8"],
      ["1.1.1.1", "public IPv4"],
    ] as const)
      it(`permits ${address} (${why})`, function () {
        expect(guard.permits(address)).to.equal(true);
      });
  });

  describe("the operator's exceptions still open what they name", function () {
    it("an IPv4 exception covers its mapped and well-known NAT64 forms", function () {
      const guard = makeAddressGuard(["127.0.0.1"]);
      expect([
        guard.permits("127.0.0.1"),
        guard.permits("::ffff:127.0.0.1"),
        guard.permits("64:ff9b::7f00:1"),
        guard.permits("::ffff:0:7f00:1"),
        guard.permits("64:ff9b:1::7f00:1"),
      ]).to.deep.equal([true, true, true, false, false]);
    });

    it("an IPv6 exception opens exactly its range", function () {
      const guard = makeAddressGuard(["64:ff9b:1::/48", "2001:db8::/32", "fd00::/8"]);
      expect([
        guard.permits("64:ff9b:1::a00:1"),
        guard.permits("2001:db8::1"),
        guard.permits("fd12::1"),
        guard.permits("3fff::1"),
        guard.permits("fe80::1"),
      ]).to.deep.equal([true, true, true, false, false]);
    });
  });

  describe("on the real stack", function () {
    this.timeout(180_000);
    let s: Stack;
    let key: string;
    let cid: string;
    let pkpId: string;
    /** One address per registry entry (its middle one; the embedding prefixes: their first). */
    const perPrefix = TABLE.map((e) => ({ ...e, address: e.addresses[Math.floor(e.addresses.length / 2)] }));
    const regressions = ["::ffff:0:7f00:1", "64:ff9b:1::a00:1"];

    before(async function () {
      s = await startStack({
        executor: { poolSize: 2, limits: { maxFetches: 200 } },
        rateLimits: { perKeyPerMinute: 100_000, perAccountPerMinute: 100_000, perIpPerMinute: 100_000 },
      });
      // Tries every URL in params.urls and reports each outcome.
      const a = await setupAccount(
        s,
        `async function main(p) {
          const out = [];
          for (const url of p.urls) {
            try { await fetch(url); out.push("fetched"); } catch (e) { out.push(String(e.code)); }
          }
          return out;
        }`,
      );
      ({ accountKey: key, cid, pkpId } = a);
    });
    after(async function () {
      await s?.close();
    });

    for (const { prefix, name, address } of perPrefix)
      it(`a webhook to ${prefix} (${name}) is 400 webhook_url_refused`, async function () {
        const r = await s.api("POST", "/core/v1/webhooks", {
          key,
          body: { url: `https://${urlHost(address)}/hook`, event_types: ["payment.credited"] },
        });
        expect([r.status, r.body.error?.code]).to.deep.equal([400, "webhook_url_refused"]);
      });

    for (const address of regressions)
      it(`a webhook to https://[${address}]/ is 400 webhook_url_refused`, async function () {
        const r = await s.api("POST", "/core/v1/webhooks", {
          key,
          body: { url: `https://[${address}]:8443/`, event_types: ["payment.credited"] },
        });
        expect([r.status, r.body.error?.code]).to.deep.equal([400, "webhook_url_refused"]);
      });

    it("an action's fetch to every registry entry is fetch_address_refused", async function () {
      const urls = [...perPrefix.map((e) => e.address), ...regressions].map((a) => `http://${urlHost(a)}/`);
      const r = await s.api("POST", "/core/v1/svc_action", {
        key,
        body: { cid, pkp_id: pkpId, js_params: { urls } },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      const refused = Object.fromEntries(urls.map((u, i) => [u, r.body.response[i]]));
      expect(refused).to.deep.equal(Object.fromEntries(urls.map((u) => [u, "fetch_address_refused"])));
    });
  });
});
