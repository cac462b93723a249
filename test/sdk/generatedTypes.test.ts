/**
 * The SDK's types are the served document's: regenerate them from what a running relayer serves at
 * /core/v1/openapi.json and compare with the committed sdk/generated/schema.ts. When this fails, run
 * `npm run sdk:generate` and commit the result (after checking that the document is right).
 */
import * as fs from "node:fs";
import { expect } from "chai";
import { schemaTypes } from "../../sdk/generateSchemaTypes";
import { SCHEMA_FILE } from "../../sdk/scripts/generateTypes";
import { startStack, type Stack } from "../helpers/stack";

describe("SDK: generated types match the served OpenAPI document", function () {
  this.timeout(120_000);
  let s: Stack;
  before(async () => {
    s = await startStack();
  });
  after(async () => {
    await s?.close();
  });

  it("regenerating from the served document gives the committed file, byte for byte", async () => {
    const served = await (await fetch(`${s.url}/core/v1/openapi.json`)).json();
    const regenerated = await schemaTypes(served as Record<string, unknown>);
    expect(
      regenerated === fs.readFileSync(SCHEMA_FILE, "utf8"),
      "sdk/generated/schema.ts is stale: npm run sdk:generate",
    ).to.equal(true);
  });

  it("a change to the document shows (the comparison is not vacuous)", async () => {
    const served = (await (await fetch(`${s.url}/core/v1/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
    };
    delete served.paths["/core/v1/account"];
    expect(await schemaTypes(served as unknown as Record<string, unknown>)).to.not.equal(
      fs.readFileSync(SCHEMA_FILE, "utf8"),
    );
  });
});
