import { expect } from "chai";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { repoFiles } from "../../testkit/repoFiles";

/**
 * design §1, docs/background.md: nothing outside enclave/ imports enclave internals. The only allowed entry
 * point is enclave/index.ts (imported as "…/enclave", "…/enclave/index" or bare "enclave"). Tests of
 * the enclave itself (test/enclave, test/executor) may import internals.
 */
const REPO = path.resolve(__dirname, "../..");
const ALLOWED_TEST_DIRS = [path.join("test", "enclave"), path.join("test", "executor")];
const TS = /\.(ts|tsx|mts|cts)$/;
// import … from "x" | export … from "x" | import "x" | import("x") | require("x")
const SPECIFIERS = [
  /\b(?:import|export)\s[^'"`;]*?\bfrom\s*["']([^"']+)["']/g,
  /\bimport\s*["']([^"']+)["']/g,
  /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g,
  /\brequire\s*\(\s*["']([^"']+)["']\s*\)/g,
];

export function listSourceFiles(root: string): string[] {
  return repoFiles(root, TS);
}

/** The enclave-internal imports of one file, as "file: specifier" strings. */
export function violationsIn(root: string, file: string, tolerated: string[] = []): string[] {
  const rel = path.relative(root, file);
  if (rel.startsWith("enclave" + path.sep)) return [];
  if (ALLOWED_TEST_DIRS.some((d) => rel.startsWith(d + path.sep))) return [];
  const source = readFileSync(file, "utf8");
  const enclaveDir = path.join(root, "enclave");
  const allowed = new Set([
    enclaveDir,
    path.join(enclaveDir, "index"),
    path.join(enclaveDir, "index.ts"),
    ...tolerated.map((t) => path.join(root, t)),
  ]);
  const found: string[] = [];
  for (const re of SPECIFIERS) {
    for (const m of source.matchAll(re)) {
      const spec = m[1];
      let target: string | null = null;
      if (spec.startsWith(".")) target = path.resolve(path.dirname(file), spec);
      else if (spec === "enclave" || spec.startsWith("enclave/")) target = path.join(root, spec);
      if (target === null) continue;
      const inside = target === enclaveDir || target.startsWith(enclaveDir + path.sep);
      if (inside && !allowed.has(target.replace(/\.js$/, ""))) found.push(`${rel}: ${spec}`);
    }
  }
  return [...new Set(found)];
}

export function scan(root: string, tolerated: string[] = []): string[] {
  return listSourceFiles(root).flatMap((f) => violationsIn(root, f, tolerated));
}

/**
 * Where a root key may enter enclave/ (docs/enclave.md, "Root key"): the providers in
 * enclave/rootKeyProviders/ and Enclave.fromRootKey. Returns the files that break it: any other file
 * importing dstack's SDK (the KMS client), any other caller of loadRootKey/decodeRootKey, or any other
 * construction of an Enclave.
 */
export function rootKeyEntryViolations(root: string): string[] {
  const allowed: Record<string, string[]> = {
    "@phala/dstack-sdk": ["enclave/rootKeyProviders/dstack.ts"],
    "loadRootKey(": ["enclave/rootKey.ts", "enclave/rootKeyProviders/file.ts"],
    "decodeRootKey(": ["enclave/rootKey.ts", "enclave/rootKeyProviders/dstack.ts", "enclave/enclave.ts"],
    "new Enclave(": ["enclave/enclave.ts"],
  };
  const found: string[] = [];
  for (const file of listSourceFiles(root)) {
    const rel = path.relative(root, file).split(path.sep).join("/");
    // The rule is about the service's code; tests may cross-check with the SDK's helpers.
    if (rel.startsWith("test/")) continue;
    const source = readFileSync(file, "utf8");
    const imports = SPECIFIERS.flatMap((re) =>
      [...source.matchAll(re)].map((m) => m[1].split("/").slice(0, 2).join("/")),
    );
    for (const [needle, files] of Object.entries(allowed)) {
      // The package counts when imported (comments may name it); the functions when called.
      const present = needle.startsWith("@") ? imports.includes(needle) : source.includes(needle);
      if (present && !files.includes(rel)) found.push(`${rel}: ${needle}`);
    }
  }
  return found;
}

describe("enclave boundary", function () {
  it("no file outside enclave/ imports an enclave module other than enclave/index", function () {
    expect(scan(REPO)).to.deep.equal([]);
  });

  it("a root key enters only through a provider (enclave/rootKeyProviders/) or Enclave.fromRootKey", function () {
    expect(rootKeyEntryViolations(REPO)).to.deep.equal([]);
    // Exactly two constructions: Enclave.open (a provider's key) and Enclave.fromRootKey.
    const enclaveSource = readFileSync(path.join(REPO, "enclave", "enclave.ts"), "utf8");
    expect(enclaveSource.match(/new Enclave\(/g)).to.have.length(2);
    expect(enclaveSource).to.match(/private constructor\(/);
  });

  describe("the root-key entry scanner", function () {
    let root: string;
    beforeEach(() => {
      root = mkdtempSync(path.join(tmpdir(), "sigil-rootkey-"));
      mkdirSync(path.join(root, "enclave", "rootKeyProviders"), { recursive: true });
      mkdirSync(path.join(root, "relayer"), { recursive: true });
      writeFileSync(
        path.join(root, "enclave", "rootKeyProviders", "dstack.ts"),
        'import "@phala/dstack-sdk";',
      );
    });
    afterEach(() => rmSync(root, { recursive: true, force: true }));

    it("allows dstack's SDK in the dstack provider", function () {
      expect(rootKeyEntryViolations(root)).to.deep.equal([]);
    });

    it("flags dstack's SDK anywhere else, inside enclave/ or not", function () {
      writeFileSync(path.join(root, "relayer", "x.ts"), 'import { DstackClient } from "@phala/dstack-sdk";');
      writeFileSync(path.join(root, "enclave", "y.ts"), 'const m = require("@phala/dstack-sdk");');
      expect(rootKeyEntryViolations(root).sort()).to.deep.equal([
        "enclave/y.ts: @phala/dstack-sdk",
        "relayer/x.ts: @phala/dstack-sdk",
      ]);
    });

    it("flags another loader of a root key", function () {
      writeFileSync(path.join(root, "enclave", "z.ts"), "const k = await loadRootKey({});");
      expect(rootKeyEntryViolations(root)).to.deep.equal(["enclave/z.ts: loadRootKey("]);
    });
  });

  describe("the scanner", function () {
    let root: string;
    const file = (rel: string, text: string) => {
      mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      writeFileSync(path.join(root, rel), text);
    };
    beforeEach(() => {
      root = mkdtempSync(path.join(tmpdir(), "sigil-boundary-"));
      file("enclave/index.ts", "export {};");
      file("enclave/derive.ts", "export {};");
    });
    afterEach(() => rmSync(root, { recursive: true, force: true }));

    for (const [name, text] of [
      ["a relative import of an internal module", 'import { hkdfBytes } from "../enclave/derive";'],
      ["a relative import with a .js suffix", 'import { hkdfBytes } from "../enclave/derive.js";'],
      ["a re-export", 'export * from "../enclave/derive";'],
      ["a type-only import", 'import type { Label } from "../enclave/derive";'],
      ["a side-effect import", 'import "../enclave/derive";'],
      ["a dynamic import", 'const m = await import("../enclave/derive");'],
      ["a require", 'const m = require("../enclave/derive");'],
      ["a bare deep specifier", 'import x from "enclave/derive";'],
      ["a multi-line import", 'import {\n  a,\n  b,\n} from "../enclave/executor/pool";'],
      [
        "the executor's entry point when not tolerated",
        'import { ActionExecutor } from "../enclave/executor";',
      ],
    ] as const) {
      it(`flags ${name}`, function () {
        file("relayer/x.ts", text);
        expect(scan(root)).to.deep.equal([
          `${path.join("relayer", "x.ts")}: ${/["']([^"']+)["']/.exec(text)![1]}`,
        ]);
      });
    }

    it("tolerates a listed specifier only when asked, and nothing deeper", function () {
      file(
        "relayer/x.ts",
        'import { A } from "../enclave/executor";\nimport { B } from "../enclave/executor/pool";',
      );
      expect(scan(root, ["enclave/executor"])).to.deep.equal([
        `${path.join("relayer", "x.ts")}: ../enclave/executor/pool`,
      ]);
    });

    for (const [name, rel, text] of [
      ["the index by directory", "relayer/x.ts", 'import { Enclave } from "../enclave";'],
      ["the index by name", "relayer/x.ts", 'import { Enclave } from "../enclave/index";'],
      ["bare enclave", "relayer/x.ts", 'import { Enclave } from "enclave";'],
      ["internals from enclave/ itself", "enclave/enclave.ts", 'import { x } from "./derive";'],
      ["internals from test/enclave", "test/enclave/a.test.ts", 'import { x } from "../../enclave/derive";'],
      [
        "internals from test/executor",
        "test/executor/a.test.ts",
        'import { x } from "../../enclave/derive";',
      ],
      ["an unrelated module named like enclave", "relayer/x.ts", 'import { x } from "./enclaveClient";'],
      ["node_modules", "node_modules/pkg/x.ts", 'import { x } from "../../enclave/derive";'],
    ] as const) {
      it(`allows ${name}`, function () {
        file(rel, text);
        expect(scan(root)).to.deep.equal([]);
      });
    }
  });
});
