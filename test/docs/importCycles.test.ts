import { expect } from "chai";
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { repoFiles } from "../../testkit/repoFiles";

/**
 * No import cycles among the repository's own TypeScript files. A cycle makes load order matter (a
 * module can see another half-initialised) and hides which of two modules is the lower layer; the way
 * out is to move what both need into a module of its own. Type-only imports count too: they still say
 * that each module knows the other. The graph is read with the compiler's own import scanner
 * (`preProcessFile`), so no dependency is added for it.
 */
const REPO = path.resolve(__dirname, "../..");
const SOURCE = /\.(ts|tsx|mts)$/;
const RESOLVE_AS = ["", ".ts", ".tsx", ".mts", "/index.ts", "/index.tsx"];

// Test fixtures are inputs to other tests (some deliberately malformed), not modules of the house.
const sourceFiles = (dir: string): string[] => repoFiles(dir, SOURCE, ["fixtures"]);

/** The repository file a relative specifier names, or undefined (a package, or not a source file). */
function resolve(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".")) return undefined;
  const base = path.resolve(path.dirname(from), specifier);
  for (const suffix of RESOLVE_AS) {
    const candidate = base + suffix;
    if (SOURCE.test(candidate) && existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

/** Each file's imports of other repository files (static imports, re-exports, `import()` and `require`). */
function importGraph(files: string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets = importedFiles.map((f) => resolve(file, f.fileName)).filter((t): t is string => !!t);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Every cycle found by a depth-first search, each as the files along it (first file repeated last). */
export function findCycles(graph: Map<string, string[]>): string[][] {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (node: string): void => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return cycles;
}

describe("repository: no import cycles", function () {
  it("bench/ and testkit/ do not import test/ (what they share with the tests lives in testkit/)", function () {
    this.timeout(60_000);
    const files = sourceFiles(REPO).filter((f) => /^(bench|testkit)\//.test(path.relative(REPO, f)));
    expect(files.length).to.be.greaterThan(10);
    const wrong: string[] = [];
    for (const [file, targets] of importGraph(files))
      for (const t of targets)
        if (path.relative(REPO, t).startsWith("test/"))
          wrong.push(`${path.relative(REPO, file)} → ${path.relative(REPO, t)}`);
    expect(wrong, wrong.join("\n")).to.deep.equal([]);
  });

  it("the search finds a cycle when there is one", () => {
    const graph = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a"]],
      ["d", ["a"]],
    ]);
    expect(findCycles(graph)).to.deep.equal([["a", "b", "c", "a"]]);
    expect(
      findCycles(
        new Map([
          ["a", ["b"]],
          ["b", []],
        ]),
      ),
    ).to.deep.equal([]);
  });

  it("no TypeScript file of the repository imports itself through others", function () {
    this.timeout(60_000);
    const files = sourceFiles(REPO);
    expect(files.length).to.be.greaterThan(400);
    const cycles = findCycles(importGraph(files)).map((c) =>
      c.map((f) => path.relative(REPO, f)).join(" → "),
    );
    expect(cycles, cycles.join("\n")).to.deep.equal([]);
  });
});
