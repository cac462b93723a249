/** The unit per-IP limits count: IPv4 addresses, IPv6 /64 prefixes. */
import { expect } from "chai";
import { limitedAddress } from "../../relayer/rateLimit";

describe("relayer: limitedAddress (the unit of per-IP limits)", () => {
  it("keeps an IPv4 address as it is", () => {
    expect(limitedAddress("203.0.113.7")).to.equal("203.0.113.7");
  });

  it("counts an IPv4-mapped IPv6 address as its IPv4 address", () => {
    expect(limitedAddress("::ffff:127.0.0.1")).to.equal("127.0.0.1");
  });

  it("counts every address of one IPv6 /64 as one", () => {
    expect(limitedAddress("2001:db8:1:2:aaaa:bbbb:cccc:dddd")).to.equal("2001:db8:1:2::/64");
    expect(limitedAddress("2001:0db8:0001:0002::1")).to.equal("2001:db8:1:2::/64");
    expect(limitedAddress("2001:db8::1")).to.equal("2001:db8:0:0::/64");
    expect(limitedAddress("::1")).to.equal("0:0:0:0::/64");
  });

  it("leaves anything it cannot parse as it is", () => {
    expect(limitedAddress("unknown")).to.equal("unknown");
    expect(limitedAddress("1:2:3")).to.equal("1:2:3");
  });
});
