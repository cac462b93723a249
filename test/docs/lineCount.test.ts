import { expect } from "chai";
import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { FEATURES, belongsTo, lineCounts, relayerSizes } from "../../scripts/lineCount";

/**
 * `npm run lines` subtracts the three features' own files from the relayer's size. A feature file that
 * is renamed or moved would silently fall back into the older behaviour's figure, so each listed path
 * must still exist, and no file may count for two features.
 */
const REPO = path.resolve(__dirname, "../..");

describe("npm run lines: the relayer's size less the features' own files", () => {
  it("names only files and folders that exist", () => {
    for (const { name, files } of FEATURES) {
      for (const f of files) {
        const at = path.join(REPO, f);
        expect(existsSync(at), `${name}: ${f}`).to.equal(true);
        expect(statSync(at).isDirectory(), `${name}: ${f} (a folder ends in "/")`).to.equal(f.endsWith("/"));
      }
    }
  });

  it("counts each file for at most one feature, and the rest as the older behaviour", () => {
    const counts = lineCounts();
    for (const file of counts.keys()) {
      const owners = FEATURES.filter((f) => belongsTo(file, f)).map((f) => f.name);
      expect(owners.length, `${file}: ${owners.join(", ")}`).to.be.at.most(1);
    }
    const sizes = relayerSizes(counts);
    const featureLines = sizes.features.reduce((n, f) => n + f.lines, 0);
    expect(sizes.core + featureLines).to.equal(sizes.total);
    for (const f of sizes.features) expect(f.files, f.name).to.be.greaterThan(0);
    expect(counts.get("relayer/app.ts")).to.be.greaterThan(0);
  });
});
