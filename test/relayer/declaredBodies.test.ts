/**
 * A body is checked by its declaration alone: an endpoint declared here, whose handler reads nothing
 * itself, is mounted by `declaredRouter` on a real Express server, and bad bodies are refused with the
 * house's codes before the handler runs; a good one reaches it read and typed (defaults filled in, ids
 * canonical).
 */
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { expect } from "chai";
import express from "express";
import { ApiError } from "../../relayer/errors";
import { sendError, toApiError } from "../../relayer/http/errorHandler";
import { bodyErrors, compileBody } from "../../relayer/routes/bodySchema";
import {
  declaredRouter,
  endpoint,
  operationOf,
  runPlain,
  type BodyOf,
  type Schema,
} from "../../relayer/routes/endpoint";
import * as s from "../../relayer/routes/schemas";

const PKP = "0x" + "AB".repeat(32);

const body = s.exactlyOne(
  ["code", "cid"],
  s.obj(
    {
      name: s.text(8),
      code: s.bytes(16),
      cid: s.cid(),
      pkps: s.list(s.pkpRef, 2),
      enabled: s.flag(),
      count: { type: "integer", minimum: 1, maximum: 5 } as s.Typed<number>,
      limit: s.int(),
    },
    ["count"],
  ),
);

describe("relayer: a declared body is enforced without handler code", function () {
  let server: Server;
  let base: string;
  const received: unknown[] = [];

  before(async () => {
    const echo = endpoint<null>("POST", "/echo", {
      caller: "public",
      summary: "echo",
      body,
      // A rule the schema cannot say, next to the declaration: it reads `limit` instead.
      checks: { limit: (v) => (v === undefined ? 3 : Number(v) * 2) },
      answer: {},
      errors: [],
      async handle(_c, _req, _res, read: BodyOf<typeof body>) {
        received.push(read);
        return { body: read };
      },
    });
    const app = express();
    app.use(express.json());
    app.use(
      declaredRouter(null, [echo], {
        guards: {},
        run: (e) => runPlain(null, e),
        onError: (err, _req, res, next) => {
          const api = toApiError(err);
          if (!api) return next(err);
          sendError(res, api);
        },
      }),
    );
    server = app.listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise((r) => server.close(r)));

  const post = async (json: unknown) => {
    const r = await fetch(`${base}/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(json),
    });
    return { status: r.status, body: (await r.json()) as { error?: { code: string; details?: unknown } } };
  };
  const refused = async (json: unknown, code: string, field?: string) => {
    const before = received.length;
    const r = await post(json);
    expect(r.status, JSON.stringify(r.body)).to.equal(400);
    expect(r.body.error?.code).to.equal(code);
    if (field !== undefined) expect(r.body.error?.details).to.include({ field });
    expect(received.length, "the handler ran").to.equal(before);
  };

  it("an unknown field: unknown_field naming it", () =>
    refused({ code: "x", count: 1, nmae: "y" }, "unknown_field", "nmae"));
  it("not an object: invalid_request", () => refused([1, 2], "invalid_request"));
  it("a required field left out: invalid_request naming it", () =>
    refused({ code: "x" }, "invalid_request", "count"));
  it("a wrong type: invalid_request naming it", () =>
    refused({ code: "x", count: "1" }, "invalid_request", "count"));
  it("out of range: invalid_request", () => refused({ code: "x", count: 6 }, "invalid_request", "count"));
  it("a flag that is not a boolean: invalid_request", () =>
    refused({ code: "x", count: 1, enabled: "yes" }, "invalid_request", "enabled"));
  it("too many bytes: string_too_long with the limit", async () => {
    await refused({ code: "x", count: 1, name: "é".repeat(5) }, "string_too_long", "name");
  });
  it("too many entries: too_many_entries", () =>
    refused({ code: "x", count: 1, pkps: [PKP, PKP, PKP] }, "too_many_entries", "pkps"));
  it("a bad id in a list: its own code, naming the entry", () =>
    refused({ code: "x", count: 1, pkps: [PKP, "0x12"] }, "invalid_pkp_id", "pkps[1]"));
  it("a bad CID: invalid_cid", () => refused({ cid: "notacid", count: 1 }, "invalid_cid", "cid"));
  it("both or neither of code and cid: invalid_request", async () => {
    await refused({ count: 1 }, "invalid_request", "code");
    await refused({ code: "x", cid: "bafkqaaa", count: 1 }, "invalid_request", "code");
  });
  it("an unpaired surrogate: invalid_request", () =>
    refused({ code: "\ud800", count: 1 }, "invalid_request", "code"));

  it("a good body reaches the handler read: defaults filled, null as absent, ids canonical, checks applied", async () => {
    const r = await post({ code: "x", count: 2, enabled: null, pkps: [PKP], limit: 4 });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body).to.deep.equal({
      name: "",
      code: "x",
      pkps: [PKP.toLowerCase()],
      enabled: false,
      count: 2,
      limit: 8,
    });
  });

  it("a required id left out answers its format's code", () => {
    const read = compileBody(s.obj({ new_owner: s.addressIn }, ["new_owner"]));
    expect(() => read({}, null))
      .to.throw(ApiError)
      .with.property("code", "invalid_address");
  });

  it("the codes the body can answer are derived from it: exactly those refused above, checked fields aside", () => {
    const codes = ["invalid_cid", "invalid_pkp_id", "invalid_request", "string_too_long", "too_many_entries"];
    expect(bodyErrors(body, ["limit"]).sort()).to.deep.equal([...codes, "unknown_field"]);
    // A field read by the declaration's own check is the check's to list (`pkps`: its two codes go).
    expect(bodyErrors(body, ["limit", "pkps"]).sort()).to.deep.equal([
      "invalid_cid",
      "invalid_request",
      "string_too_long",
      "unknown_field",
    ]);
    // The operation lists them with the body parser's, though the declaration names none of them.
    const e = endpoint<never>("POST", "/echo", {
      caller: "public",
      summary: "echo",
      body,
      checks: { limit: (v) => v },
      answer: {},
      errors: [],
      handle: async () => ({ body: {} }),
    });
    const responses = operationOf(e).responses as Record<string, { description: string }>;
    const listed = responses["400"].description.split(", ");
    expect(listed).to.include.members([...codes, "unknown_field", "invalid_json"]);
    expect(responses["413"].description.split(", ")).to.include("payload_too_large");
  });

  it("the formats' codes are derived too: addresses, group ids, expirations", () => {
    const groups = (s.keyCreate as { properties: Record<string, Schema> }).properties.execute_in_groups;
    const schema = s.obj({ owner: s.addressIn, execute_in_groups: groups, expiration: s.expirationIn });
    const read = compileBody(schema);
    const refusal = (sent: Record<string, unknown>) => {
      try {
        read(sent, null);
      } catch (err) {
        return (err as ApiError).code;
      }
      return "accepted";
    };
    const refused = [
      refusal({ owner: "0x12" }),
      refusal({ execute_in_groups: [-1] }),
      refusal({ execute_in_groups: new Array(65).fill(1) }),
      refusal({ expiration: 1 }),
    ];
    expect(refused).to.deep.equal([
      "invalid_address",
      "invalid_group_id",
      "too_many_entries",
      "expiration_in_past",
    ]);
    expect(bodyErrors(schema).sort()).to.deep.equal([...refused, "invalid_request", "unknown_field"].sort());
  });

  it("a check for a field the body does not declare is refused at registration", () => {
    expect(() => compileBody(s.obj({ a: s.str() }), { b: () => 1 })).to.throw(/does not declare/);
  });
});
