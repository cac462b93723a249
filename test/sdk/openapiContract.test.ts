/**
 * The validator behind the contract check of every HTTP test (testkit/stack.ts): it must refuse an
 * unknown field, a wrong type, a missing field and an undocumented status, or the check would prove nothing.
 */
import { expect } from "chai";
import { openApiContract, placeholderDocument } from "../helpers/openapiContract";

const contract = openApiContract();
const GROUP = { group_id: 1, name: "g", description: "", pkps: [], actions: [], policy_cid: null };

describe("OpenAPI contract validator", () => {
  it("accepts an answer the document describes", () => {
    expect(contract.violation("GET", "/core/v1/groups/1", 200, GROUP)).to.equal(null);
  });
  it("refuses an unknown field", () => {
    expect(contract.violation("GET", "/core/v1/groups/1", 200, { ...GROUP, extra: 1 })).to.equal(
      "GET /core/v1/groups/{id} 200: body must NOT have additional properties",
    );
  });
  it("refuses a wrong type", () => {
    expect(contract.violation("GET", "/core/v1/groups/1", 200, { ...GROUP, group_id: "1" })).to.equal(
      "GET /core/v1/groups/{id} 200: body/group_id must be integer",
    );
  });
  it("refuses a missing field", () => {
    const { name: _name, ...rest } = GROUP;
    void _name;
    expect(contract.violation("GET", "/core/v1/groups/1", 200, rest)).to.equal(
      "GET /core/v1/groups/{id} 200: body must have required property 'name'",
    );
  });
  it("refuses a status the operation does not list", () => {
    expect(contract.violation("GET", "/core/v1/groups/1", 418, {})).to.equal(
      "GET /core/v1/groups/{id} answered 418, which the document does not list",
    );
  });
  it("refuses an error code outside the catalogue", () => {
    const body = {
      error: { code: "no_such_code", message: "m", docs_url: "docs/errors.md" },
      request_id: "r",
    };
    expect(contract.violation("GET", "/core/v1/groups/1", 404, body)).to.match(
      /^GET \/core\/v1\/groups\/\{id\} 404: body\/error\/code must be equal to one of the allowed values/,
    );
  });
  it("closes every object of every success answer (additionalProperties: false)", () => {
    const open: string[] = [];
    const walk = (s: unknown, at: string): void => {
      if (!s || typeof s !== "object") return;
      const o = s as Record<string, unknown>;
      if (o.type === "object" && o.properties && o.additionalProperties !== false) open.push(at);
      for (const [k, v] of Object.entries(o)) walk(v, `${at}/${k}`);
    };
    const doc = placeholderDocument();
    walk(doc.components.schemas, "components");
    for (const [p, item] of Object.entries(doc.paths))
      for (const [m, op] of Object.entries(item as Record<string, { responses: Record<string, unknown> }>))
        for (const [status, r] of Object.entries(op.responses))
          if (status.startsWith("2")) walk(r, `${m} ${p} ${status}`);
    expect(open).to.deep.equal([]);
  });
});
