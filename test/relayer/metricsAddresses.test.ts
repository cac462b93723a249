/**
 * GET /metrics follows GET /health's rule for deployment details: the gas wallets' addresses map the
 * deployment, so an anonymous scrape gets the gas wallet gauges by index only, and the operator's scrape
 * (X-Operator-Token, or Authorization: Bearer) also gets sigil_gas_wallet_info{wallet, address}. Real
 * stack; the gas wallets' balances are read by the relayer's own monitor.
 */
import { expect } from "chai";
import { OPERATOR_HEADERS, TEST_OPERATOR_TOKEN, startStack, type Stack } from "../helpers/stack";

const ADDRESS = /0x[0-9a-fA-F]{40}/;

describe("relayer: /metrics publishes gas wallet addresses only with the operator token", function () {
  this.timeout(120_000);
  let s: Stack;
  let wallets: string[];

  const scrape = async (headers: Record<string, string> = {}) => {
    const r = await fetch(`${s.url}/metrics`, { headers });
    return { status: r.status, text: await r.text() };
  };

  before(async () => {
    s = await startStack({ gasWallets: 2, gasBalancePollMs: 100 });
    const h = await s.api("GET", "/health", { headers: OPERATOR_HEADERS });
    wallets = h.body.gas_wallets;
    expect(wallets).to.have.length(2);
    // Until the monitor's first reading, balances have no sample.
    for (;;) {
      if ((await scrape()).text.includes("sigil_gas_wallet_balance_wei{")) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  after(async () => {
    await s?.close();
  });

  it("an anonymous scrape names no address", async () => {
    const { status, text } = await scrape();
    expect([status, ADDRESS.exec(text)?.[0] ?? null]).to.deep.equal([200, null]);
  });

  it("an anonymous scrape has each wallet's balance, low and unfunded gauges by index", async () => {
    const { text } = await scrape();
    for (const i of ["0", "1"]) {
      expect(text).to.match(new RegExp(`^sigil_gas_wallet_balance_wei\\{wallet="${i}"\\} \\d`, "m"));
      expect(text).to.match(new RegExp(`^sigil_gas_wallet_low\\{wallet="${i}"\\} [01]$`, "m"));
      expect(text).to.match(new RegExp(`^sigil_gas_wallet_unfunded\\{wallet="${i}"\\} 0$`, "m"));
    }
  });

  it("an anonymous scrape has no sigil_gas_wallet_info", async () => {
    expect((await scrape()).text).not.to.contain("sigil_gas_wallet_info");
  });

  it("with X-Operator-Token each wallet index maps to its address, in /health's order", async () => {
    const { status, text } = await scrape(OPERATOR_HEADERS);
    expect(status).to.equal(200);
    const info = [
      ...text.matchAll(/^sigil_gas_wallet_info\{wallet="(\d+)",address="(0x[0-9a-fA-F]{40})"\} 1$/gm),
    ];
    expect(info.map((m) => [m[1], m[2]])).to.deep.equal(wallets.map((a, i) => [String(i), a]));
  });

  it("with Authorization: Bearer <operator token> the addresses are there too", async () => {
    const { text } = await scrape({ authorization: `Bearer ${TEST_OPERATOR_TOKEN}` });
    expect(text).to.contain(`sigil_gas_wallet_info{wallet="0",address="${wallets[0]}"} 1`);
  });

  it("the operator's scrape still has the public metrics", async () => {
    const { text } = await scrape(OPERATOR_HEADERS);
    expect(text).to.match(/^sigil_gas_wallet_balance_wei\{wallet="0"\} \d/m);
  });

  it("a token that does not match is 401 invalid_operator_token", async () => {
    const r = await fetch(`${s.url}/metrics`, { headers: { "x-operator-token": "wrong" } });
    expect([r.status, ((await r.json()) as { error: { code: string } }).error.code]).to.deep.equal([
      401,
      "invalid_operator_token",
    ]);
  });
});
