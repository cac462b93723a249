/** The bounded LRU behind the permission cache's remembered misses: size cap, eviction order, TTL. */
import { expect } from "chai";
import { BoundedCache } from "../../relayer/permissions/boundedCache";

describe("relayer: BoundedCache", () => {
  let nowMs = 0;
  const clock = () => nowMs;
  beforeEach(() => {
    nowMs = 1_000;
  });

  it("never holds more than its cap, however many keys are set", () => {
    const c = new BoundedCache<string, number>(3, Infinity, clock);
    for (let i = 0; i < 1_000; i++) c.set(`k${i}`, i);
    expect(c.size).to.equal(3);
    expect([c.get("k997"), c.get("k998"), c.get("k999")]).to.deep.equal([997, 998, 999]);
  });

  it("evicts the least recently used entry, a read counting as a use", () => {
    const c = new BoundedCache<string, number>(2, Infinity, clock);
    c.set("a", 1);
    c.set("b", 2);
    expect(c.get("a")).to.equal(1);
    c.set("c", 3);
    expect(c.get("b")).to.equal(undefined);
    expect(c.get("a")).to.equal(1);
    expect(c.get("c")).to.equal(3);
  });

  it("forgets an entry once its TTL has passed", () => {
    const c = new BoundedCache<string, boolean>(10, 5_000, clock);
    c.set("k", true);
    nowMs += 4_999;
    expect(c.get("k")).to.equal(true);
    nowMs += 1;
    expect(c.get("k")).to.equal(undefined);
    expect(c.size).to.equal(0);
  });

  it("with a TTL of 0 remembers nothing", () => {
    const c = new BoundedCache<string, boolean>(10, 0, clock);
    c.set("k", true);
    expect(c.get("k")).to.equal(undefined);
  });

  it("delete and clear drop entries at once", () => {
    const c = new BoundedCache<string, number>(10, Infinity, clock);
    c.set("a", 1);
    c.set("b", 2);
    c.delete("a");
    expect(c.get("a")).to.equal(undefined);
    c.clear();
    expect(c.size).to.equal(0);
  });

  it("refuses a cap below one", () => {
    expect(() => new BoundedCache(0)).to.throw("BoundedCache needs room for at least one entry");
  });
});
