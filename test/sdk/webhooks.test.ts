/** The SDK's verifyWebhookSignature / parseWebhookEvent against headers made by the relayer's own signer. */
import { expect } from "chai";
import { signatureHeader } from "../../relayer/webhooks/signature";
import { parseWebhookEvent, verifyWebhookSignature } from "../../sdk/index";

const SECRET = "whsec_" + "a".repeat(43);
const BODY = JSON.stringify({ id: "evt_1", type: "key.added", created: 1, account_id: 1, data: {} });
const NOW = 1_764_000_000;

describe("sdk: verifyWebhookSignature", () => {
  it("accepts the service's signature of the exact body", () => {
    expect(
      verifyWebhookSignature(SECRET, signatureHeader([SECRET], NOW, BODY), BODY, { nowSeconds: NOW }),
    ).to.equal(true);
  });

  it("accepts the body as bytes", () => {
    const header = signatureHeader([SECRET], NOW, BODY);
    expect(
      verifyWebhookSignature(SECRET, header, new TextEncoder().encode(BODY), { nowSeconds: NOW }),
    ).to.equal(true);
  });

  it("refuses another secret", () => {
    expect(
      verifyWebhookSignature("whsec_other", signatureHeader([SECRET], NOW, BODY), BODY, { nowSeconds: NOW }),
    ).to.equal(false);
  });

  it("refuses an altered body", () => {
    expect(
      verifyWebhookSignature(SECRET, signatureHeader([SECRET], NOW, BODY), BODY + " ", { nowSeconds: NOW }),
    ).to.equal(false);
  });

  it("refuses a timestamp outside the tolerance, on either side", () => {
    const header = signatureHeader([SECRET], NOW, BODY);
    expect([
      verifyWebhookSignature(SECRET, header, BODY, { nowSeconds: NOW + 301 }),
      verifyWebhookSignature(SECRET, header, BODY, { nowSeconds: NOW - 301 }),
      verifyWebhookSignature(SECRET, header, BODY, { nowSeconds: NOW + 301, toleranceSeconds: 600 }),
    ]).to.deep.equal([false, false, true]);
  });

  it("accepts either secret of a rotation's two signatures", () => {
    const header = signatureHeader(["whsec_new", SECRET], NOW, BODY);
    expect([
      verifyWebhookSignature("whsec_new", header, BODY, { nowSeconds: NOW }),
      verifyWebhookSignature(SECRET, header, BODY, { nowSeconds: NOW }),
    ]).to.deep.equal([true, true]);
  });

  it("refuses a missing or malformed header", () => {
    for (const h of [
      undefined,
      null,
      "",
      "v1=00",
      `t=${NOW}`,
      `t=abc,v1=${"0".repeat(64)}`,
      `t=${NOW},v1=zz`,
    ])
      expect(verifyWebhookSignature(SECRET, h, BODY, { nowSeconds: NOW }), String(h)).to.equal(false);
  });

  it("parseWebhookEvent returns the event, or throws when the signature does not verify", () => {
    const header = signatureHeader([SECRET], NOW, BODY);
    expect(parseWebhookEvent(SECRET, header, BODY, { nowSeconds: NOW }).id).to.equal("evt_1");
    expect(() => parseWebhookEvent("whsec_x", header, BODY, { nowSeconds: NOW })).to.throw(/does not verify/);
  });
});
