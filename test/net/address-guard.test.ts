/**
 * The address guard (enclave/net/address-guard.js) and the guarded request that uses it, as exported by
 * enclave/index.ts for reuse (webhooks): which
 * addresses a user-supplied URL may reach, checked on the address actually connected to.
 */
import { expect } from "chai";
import fc from "fast-check";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { classifyAddress, guardedLookup, guardedRequest, makeAddressGuard } from "../../enclave";

describe("net: address guard", function () {
  describe("classifyAddress", function () {
    const cases: Array<[string, string]> = [
      ["8.8.8.8", "public"],
      ["2606:4700:4700::1111", "public"],
      ["127.0.0.1", "loopback"],
      ["127.255.0.9", "loopback"],
      ["::1", "loopback"],
      ["::ffff:127.0.0.1", "loopback"],
      ["::ffff:7f00:1", "loopback"],
      ["0:0:0:0:0:ffff:7f00:0001", "loopback"],
      ["::127.0.0.1", "loopback"],
      ["10.1.2.3", "private"],
      ["172.16.0.1", "private"],
      ["172.31.255.255", "private"],
      ["192.168.1.1", "private"],
      ["100.100.100.200", "private"],
      ["fd00:ec2::254", "private"],
      ["64:ff9b::a00:1", "private"],
      ["169.254.169.254", "metadata"],
      ["::ffff:169.254.169.254", "metadata"],
      ["168.63.129.16", "metadata"],
      ["169.254.1.1", "link-local"],
      ["fe80::1", "link-local"],
      ["fe80::1%eth0", "link-local"],
      ["0.0.0.0", "unspecified"],
      ["::", "unspecified"],
      ["224.0.0.1", "multicast"],
      ["ff02::1", "multicast"],
      ["255.255.255.255", "reserved"],
      ["2001:db8::1", "reserved"],
      ["172.32.0.1", "public"],
    ];
    for (const [address, category] of cases) {
      it(`classifies ${address} as ${category}`, function () {
        expect(classifyAddress(address)).to.equal(category);
      });
    }

    it("throws a TypeError for a host name", function () {
      expect(() => classifyAddress("localhost")).to.throw(TypeError, "not an IP address: localhost");
    });

    it("judges every IPv4-mapped IPv6 address like its IPv4 address (property)", function () {
      fc.assert(
        fc.property(fc.ipV4(), (v4) => {
          expect(classifyAddress(`::ffff:${v4}`)).to.equal(classifyAddress(v4));
        }),
      );
    });

    it("never calls a 127/8, 10/8 or 192.168/16 address public (property)", function () {
      const octet = fc.integer({ min: 0, max: 255 });
      fc.assert(
        fc.property(fc.constantFrom("127", "10", "192.168"), octet, octet, octet, (prefix, a, b, c) => {
          const address = prefix === "192.168" ? `192.168.${a}.${b}` : `${prefix}.${a}.${b}.${c}`;
          expect(makeAddressGuard().permits(address)).to.equal(false);
        }),
      );
    });
  });

  describe("makeAddressGuard", function () {
    it("permits public addresses and refuses the others by default", function () {
      const guard = makeAddressGuard();
      expect([
        guard.permits("1.1.1.1"),
        guard.permits("127.0.0.1"),
        guard.permits("::ffff:10.0.0.1"),
      ]).to.deep.equal([true, false, false]);
    });

    it("permits exactly the operator's addresses and ranges, in IPv4 and mapped IPv6 forms", function () {
      const guard = makeAddressGuard(["127.0.0.1", "10.0.0.0/8"]);
      expect([
        guard.permits("127.0.0.1"),
        guard.permits("::ffff:127.0.0.1"),
        guard.permits("127.0.0.2"),
        guard.permits("10.200.1.1"),
        guard.permits("192.168.0.1"),
      ]).to.deep.equal([true, true, false, true, false]);
    });

    it("permits every address of an allowed CIDR range and none just outside it (property)", function () {
      const guard = makeAddressGuard(["192.168.4.0/22"]);
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 255 }), (third, fourth) => {
          const inside = third >= 4 && third <= 7;
          expect(guard.permits(`192.168.${third}.${fourth}`)).to.equal(inside);
        }),
      );
    });

    it("refuses a malformed entry with a TypeError", function () {
      expect(() => makeAddressGuard(["10.0.0.0/33"])).to.throw(
        TypeError,
        "not an IP address or CIDR range: 10.0.0.0/33",
      );
      expect(() => makeAddressGuard(["example.com"])).to.throw(
        TypeError,
        "not an IP address or CIDR range: example.com",
      );
    });
  });

  describe("guardedRequest", function () {
    let server: http.Server;
    let port: number;
    let hits: number;

    before(async function () {
      server = http.createServer((req, res) => {
        hits++;
        res.end("hello");
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      port = (server.address() as AddressInfo).port;
    });

    after(async function () {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });

    beforeEach(function () {
      hits = 0;
    });

    const request = (url: string, allowed: string[] = []) =>
      guardedRequest(new URL(url), { guard: makeAddressGuard(allowed), maxBodyBytes: 1000 });

    it("refuses a loopback IP literal before connecting", async function () {
      const e = await request(`http://127.0.0.1:${port}/`).catch((x: Error & { code: string }) => x);
      expect((e as Error & { code: string }).code).to.equal("address_refused");
      expect((e as Error).message).to.equal(
        `127.0.0.1:${port} resolves to 127.0.0.1, a loopback address, which this service does not connect to`,
      );
      expect(hits).to.equal(0);
    });

    it("refuses an IPv4-mapped IPv6 literal of loopback", async function () {
      const e = await request(`http://[::ffff:127.0.0.1]:${port}/`).catch((x: Error & { code: string }) => x);
      expect((e as Error & { code: string }).code).to.equal("address_refused");
      expect(hits).to.equal(0);
    });

    it("refuses loopback written as a decimal or hexadecimal IPv4 (the URL parser normalizes it first)", async function () {
      for (const host of ["2130706433", "0x7f.1"]) {
        const e = await request(`http://${host}:${port}/`).catch((x: Error & { code: string }) => x);
        expect((e as Error & { code: string }).code, host).to.equal("address_refused");
      }
      expect(hits).to.equal(0);
    });

    it("refuses a name that resolves to loopback (localhost)", async function () {
      const e = await request(`http://localhost:${port}/`).catch((x: Error & { code: string }) => x);
      expect((e as Error & { code: string }).code).to.equal("address_refused");
      expect(hits).to.equal(0);
    });

    it("connects when the operator allowed the address", async function () {
      const res = await request(`http://localhost:${port}/`, ["127.0.0.1", "::1"]);
      expect([res.status, Buffer.from(res.body).toString()]).to.deep.equal([200, "hello"]);
      expect(hits).to.equal(1);
    });

    it("caps the body", async function () {
      const e = await guardedRequest(new URL(`http://127.0.0.1:${port}/`), {
        guard: makeAddressGuard(["127.0.0.1"]),
        maxBodyBytes: 3,
      }).catch((x: Error & { code: string }) => x);
      expect((e as Error & { code: string }).code).to.equal("body_too_large");
    });
  });

  describe("guardedLookup (no DNS rebinding)", function () {
    type Resolver = Parameters<typeof guardedLookup>[1];

    it("resolves once and answers only with a permitted address", async function () {
      let calls = 0;
      const resolver: Resolver = (_host, _opts, cb) => {
        calls++;
        cb(null, [
          { address: "10.0.0.7", family: 4 },
          { address: "93.184.216.34", family: 4 },
        ]);
      };
      const lookup = guardedLookup(makeAddressGuard(), resolver);
      const answer = await new Promise<string>((resolve, reject) =>
        lookup("mixed.example", {}, (err, address) => (err ? reject(err) : resolve(address as string))),
      );
      expect([answer, calls]).to.deep.equal(["93.184.216.34", 1]);
    });

    it("refuses a name whose every address is private", async function () {
      const resolver: Resolver = (_host, _opts, cb) => cb(null, [{ address: "169.254.169.254", family: 4 }]);
      const lookup = guardedLookup(makeAddressGuard(), resolver);
      const err = await new Promise<Error>((resolve) =>
        lookup("rebind.example", {}, (e) => resolve(e as Error)),
      );
      expect(err.message).to.equal(
        "rebind.example resolves to 169.254.169.254, a metadata address, which this service does not connect to",
      );
    });

    it("makes the connection go to the address the guard approved", async function () {
      // The resolver answers a different address on a second call (a rebinding name); the request
      // must connect to the first answer without asking again.
      let calls = 0;
      const resolver: Resolver = (_host, _opts, cb) => {
        calls++;
        cb(null, [{ address: calls === 1 ? "127.0.0.1" : "10.9.9.9", family: 4 }]);
      };
      const server = http.createServer((_req, res) => res.end("pinned"));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      try {
        const port = (server.address() as AddressInfo).port;
        const body = await new Promise<string>((resolve, reject) => {
          const req = http.request(`http://rebind.example:${port}/`, {
            lookup: guardedLookup(makeAddressGuard(["127.0.0.1"]), resolver),
            agent: false,
          });
          req.on("response", (res) => {
            let text = "";
            res.on("data", (c) => (text += c));
            res.on("end", () => resolve(text));
          });
          req.on("error", reject);
          req.end();
        });
        expect([body, calls]).to.deep.equal(["pinned", 1]);
      } finally {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      }
    });
  });
});
