/**
 * Node code imports the SDK as "sigil/sdk" or "…/sdk/index", never as the directory "…/sdk": sdk/package.json's
 * `main` names the published build (dist/index.js), absent in a checkout, so Node falls back to the index
 * with a DEP0128 warning on every `npm test`. (The dashboard's bundler resolves the directory itself.)
 */
import { expect } from "chai";
import * as fs from "node:fs";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");

describe("SDK: imported without Node's DEP0128 fallback", () => {
  it("no test, bench, script or relayer file imports the sdk directory itself", () => {
    const offenders: string[] = [];
    for (const dir of ["test", "bench", "scripts", "relayer", "cli", "enclave"]) {
      for (const f of fs.readdirSync(path.join(ROOT, dir), { recursive: true }).map(String)) {
        if (!f.endsWith(".ts")) continue;
        const src = fs.readFileSync(path.join(ROOT, dir, f), "utf8");
        if (/from "(\.\.\/)+sdk"|require\("(\.\.\/)+sdk"\)/.test(src)) offenders.push(`${dir}/${f}`);
      }
    }
    expect(offenders).to.deep.equal([]);
  });
});
