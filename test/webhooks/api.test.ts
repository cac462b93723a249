/**
 * /core/v1/webhooks over HTTP (every answer is checked against the OpenAPI document by Stack.api):
 * the account key only, the secret shown once, updates, rotation, deletion, typed refusals, and the
 * address rules at registration (no loopback, private, link-local, metadata or mapped addresses).
 */
import { expect } from "chai";
import type { Stack } from "../helpers/stack";
import { newAccount, startWebhookStack } from "./support";

// A public address literal (no DNS needed); payment.credited never fires here (no billing), so
// nothing is ever sent to it.
const PUBLIC_URL = "https://1.1.1.1/sigil-hooks";
const QUIET = ["payment.credited"];

describe("webhooks: the /core/v1/webhooks API", function () {
  this.timeout(120_000);
  let s: Stack;
  let key: string;
  let other: string;
  let usageKey: string;

  const post = (route: string, body: unknown, k = key) => s.api("POST", route, { key: k, body });
  const create = (body: Record<string, unknown> = {}) =>
    post("/core/v1/webhooks", { url: PUBLIC_URL, event_types: QUIET, ...body });
  const expectError = (
    r: { status: number; body: { error?: { code: string } } },
    status: number,
    code: string,
  ) => expect({ status: r.status, code: r.body.error?.code }).to.deep.equal({ status, code });

  before(async () => {
    s = await startWebhookStack({ maxEndpointsPerAccount: 3 });
    ({ key } = await newAccount(s, "a"));
    ({ key: other } = await newAccount(s, "b"));
    const u = await post("/core/v1/add_usage_api_key", { name: "u" });
    usageKey = u.body.usage_api_key;
  });
  after(async () => {
    await s?.close();
  });
  afterEach(async () => {
    for (const k of [key, other]) {
      const list = await s.api("GET", "/core/v1/webhooks", { key: k });
      for (const e of list.body.items) await s.api("DELETE", `/core/v1/webhooks/${e.id}`, { key: k });
    }
  });

  it("a usage key is refused with owner_only", async () => {
    expectError(
      await post("/core/v1/webhooks", { url: PUBLIC_URL, event_types: QUIET }, usageKey),
      403,
      "owner_only",
    );
    expectError(await s.api("GET", "/core/v1/webhooks", { key: usageKey }), 403, "owner_only");
  });

  it("creation answers 201 with the secret; reading the endpoint never shows it again", async () => {
    const c = await create({ description: "ops" });
    expect(c.status).to.equal(201);
    expect(c.body.secret).to.match(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(c.body).to.include({ url: PUBLIC_URL, description: "ops", enabled: true, notice: null });
    const g = await s.api("GET", `/core/v1/webhooks/${c.body.id}`, { key });
    expect(g.status).to.equal(200);
    expect(g.body).to.not.have.property("secret");
    expect(g.body.event_types).to.deep.equal(QUIET);
  });

  it("lists the account's endpoints with pagination", async () => {
    await create();
    await create();
    const r = await s.api("GET", "/core/v1/webhooks?page_size=1", { key });
    expect([r.body.items.length, r.body.total, r.body.page_size]).to.deep.equal([1, 2, 1]);
  });

  it("updates url, event types, description and enabled", async () => {
    const c = await create();
    const u = await post(`/core/v1/webhooks/${c.body.id}`, {
      url: "https://1.0.0.1/other",
      event_types: ["key.added", "key.removed"],
      description: "changed",
      enabled: false,
    });
    expect(u.status, JSON.stringify(u.body)).to.equal(200);
    expect(u.body).to.include({
      url: "https://1.0.0.1/other",
      description: "changed",
      enabled: false,
      notice: null,
    });
    expect(u.body.event_types).to.deep.equal(["key.added", "key.removed"]);
  });

  it("an unknown event type is refused with invalid_event_type", async () => {
    const r = await create({ event_types: ["key.added", "key.exploded"] });
    expectError(r, 400, "invalid_event_type");
    expect(r.body.error.message).to.contain("key.exploded");
  });

  it('"*" together with other types is refused with invalid_event_type', async () => {
    expectError(await create({ event_types: ["*", "key.added"] }), 400, "invalid_event_type");
  });

  it("an unknown field is refused with unknown_field", async () => {
    expectError(await create({ secret: "mine" }), 400, "unknown_field");
  });

  it("another account's endpoint is not found", async () => {
    const c = await create();
    expectError(
      await s.api("GET", `/core/v1/webhooks/${c.body.id}`, { key: other }),
      404,
      "webhook_not_found",
    );
    expectError(
      await s.api("DELETE", `/core/v1/webhooks/${c.body.id}`, { key: other }),
      404,
      "webhook_not_found",
    );
  });

  it("a deleted endpoint is gone", async () => {
    const c = await create();
    const d = await s.api("DELETE", `/core/v1/webhooks/${c.body.id}`, { key });
    expect(d.body).to.deep.equal({ id: c.body.id, deleted: true });
    expectError(await s.api("GET", `/core/v1/webhooks/${c.body.id}`, { key }), 404, "webhook_not_found");
  });

  it("rotate_secret returns a new secret; the previous one signs for 24 h by default", async () => {
    const c = await create();
    const r = await post(`/core/v1/webhooks/${c.body.id}/rotate_secret`, {});
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.secret)
      .to.match(/^whsec_/)
      .and.not.equal(c.body.secret);
    expect(r.body.previous_secret_expires_at - Math.floor(Date.now() / 1000)).to.be.within(86_390, 86_400);
  });

  it("rotate_secret with expire_previous_in_seconds 0 stops the previous secret at once", async () => {
    const c = await create();
    const r = await post(`/core/v1/webhooks/${c.body.id}/rotate_secret`, { expire_previous_in_seconds: 0 });
    expect(r.body.previous_secret_expires_at).to.equal(null);
    expect(
      (await s.api("GET", `/core/v1/webhooks/${c.body.id}`, { key })).body.previous_secret_expires_at,
    ).to.equal(null);
  });

  it("rotate_secret refuses a grace period over 7 days with invalid_request", async () => {
    const c = await create();
    expectError(
      await post(`/core/v1/webhooks/${c.body.id}/rotate_secret`, { expire_previous_in_seconds: 604_801 }),
      400,
      "invalid_request",
    );
  });

  it("resending an unknown delivery is webhook_delivery_not_found", async () => {
    const c = await create();
    expectError(
      await post(`/core/v1/webhooks/${c.body.id}/deliveries/whd_${"0".repeat(24)}/resend`, {}),
      404,
      "webhook_delivery_not_found",
    );
  });

  it("more endpoints than the account may have is too_many_webhooks", async () => {
    for (let i = 0; i < 3; i++) expect((await create()).status).to.equal(201);
    expectError(await create(), 409, "too_many_webhooks");
  });

  describe("addresses refused at registration", () => {
    for (const [url, category] of [
      ["https://127.0.0.1/hook", "loopback"],
      ["https://[::1]/hook", "loopback"],
      ["https://169.254.169.254/latest/meta-data", "metadata"],
      ["https://10.1.2.3/hook", "private"],
      ["https://192.168.1.20/hook", "private"],
      ["https://[::ffff:127.0.0.1]/hook", "loopback"],
      ["https://100.64.0.1/hook", "private"],
      ["https://[fd00::1]/hook", "private"],
      ["https://localhost/hook", "loopback"],
    ] as const)
      it(`${url} is webhook_url_refused (${category})`, async () => {
        const r = await create({ url });
        expectError(r, 400, "webhook_url_refused");
        expect(r.body.error.details.category).to.equal(category);
      });

    it("plain http is webhook_url_invalid where the operator allows no private address", async () => {
      expectError(await create({ url: "http://1.1.1.1/hook" }), 400, "webhook_url_invalid");
    });

    it("a user name or password in the URL is webhook_url_invalid", async () => {
      expectError(await create({ url: "https://user:pw@1.1.1.1/hook" }), 400, "webhook_url_invalid");
    });

    it("an update to a refused address is refused and changes nothing", async () => {
      const c = await create();
      expectError(
        await post(`/core/v1/webhooks/${c.body.id}`, { url: "https://127.0.0.1/x" }),
        400,
        "webhook_url_refused",
      );
      expect((await s.api("GET", `/core/v1/webhooks/${c.body.id}`, { key })).body.url).to.equal(PUBLIC_URL);
    });
  });
});
