/** docs/webhooks.md and the code agree: the verification snippet, the event types, the error codes. */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import { ERROR_CATALOGUE } from "../../relayer/errorCatalogue";
import { EVENT_TYPES } from "../../relayer/webhooks/eventTypes";

const doc = fs.readFileSync(path.join(__dirname, "..", "..", "docs", "webhooks.md"), "utf8");

describe("webhooks: docs/webhooks.md", () => {
  it("holds the verification snippet the tests run, verbatim", () => {
    const file = fs.readFileSync(path.join(__dirname, "verifySnippet.js"), "utf8");
    const snippet = file.slice(file.indexOf("\n") + 1, file.indexOf("\nmodule.exports"));
    expect(doc).to.contain("```js\n" + snippet + "```");
  });

  it("lists every event type", () => {
    for (const t of EVENT_TYPES) expect(doc, t).to.contain("| `" + t + "`");
  });

  it("names every webhook error code, each of which is catalogued", () => {
    const codes = Object.keys(ERROR_CATALOGUE).filter(
      (c) => c.includes("webhook") || c === "invalid_event_type",
    );
    expect(codes).to.have.length(9);
    for (const c of codes) expect(doc, c).to.contain("`" + c + "`");
  });
});
