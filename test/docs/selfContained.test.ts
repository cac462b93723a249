import { expect } from "chai";
import { readFileSync } from "node:fs";
import path from "node:path";
import { repoFiles } from "../../testkit/repoFiles";

/**
 * The repository stands on its own: a clone has only what is in it, so the README, docs/ and the code's
 * comments must not send a reader to design documents that live elsewhere (a specification, design or
 * reference write-up, or a folder beside the repository). What a reader needs is written in docs/.
 */
const REPO = path.resolve(__dirname, "../..");
const TEXT = /\.(ts|tsx|js|mjs|cjs|sol|md|json|html|css)$/;
// Built from parts so that this file does not match itself.
const OUTSIDE_DOCS = new RegExp(
  [
    String.raw`\.\./shared`,
    String.raw`\b(?:SPEC|DESIGN|REFERENCE|REFERENCE-GAS|TOOLCHAIN)\.md\b`,
    String.raw`\bSPEC\s+(?:section\s+)?\d`,
    String.raw`\bDESIGN\s+(?:section\s+)?\d`,
    String.raw`\bREFERENCE\s+gap`,
    String.raw`\bSPEC/REFERENCE\b`,
  ].join("|"),
);

// A merge conflict left in a file, as git writes it or after a formatter has rewritten its markers
// (a Markdown table turns "=======" into a table row, "> > >" is a reformatted ">>>>>>>").
const CONFLICT_MARKER = new RegExp(
  [
    String.raw`^<{7}( |$)`,
    String.raw`^>{7} `,
    String.raw`^(> ){7}`,
    String.raw`^\| ={7} +\|`,
    String.raw`^={7}$`,
  ].join("|"),
);

function files(dir: string): string[] {
  return repoFiles(dir, TEXT).filter((f) => path.basename(f) !== "package-lock.json");
}

describe("the repository is self-contained", function () {
  it("no file points a reader at design documents outside the repository", function () {
    const hits: string[] = [];
    for (const file of files(REPO)) {
      readFileSync(file, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (OUTSIDE_DOCS.test(line)) hits.push(`${path.relative(REPO, file)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(hits, hits.join("\n")).to.deep.equal([]);
  });

  it("no file holds a merge conflict's markers", function () {
    const hits: string[] = [];
    for (const file of files(REPO)) {
      readFileSync(file, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (CONFLICT_MARKER.test(line)) hits.push(`${path.relative(REPO, file)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(hits, hits.join("\n")).to.deep.equal([]);
  });
});
