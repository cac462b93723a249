/**
 * Import specifier resolution (enclave/executor/modules/specifier.ts): what an action may name is
 * security logic (it decides which URLs the service fetches), so besides examples, properties over
 * arbitrary specifiers: every accepted one lands under the origin with an exact version.
 */
import { expect } from "chai";
import fc from "fast-check";
import { resolveSpecifier } from "../../enclave/executor/modules/specifier";
import { ModuleError } from "../../enclave/executor/modules/errors";

const ORIGIN = "https://cdn.example/npm/";
const EXACT = /^(?:@[^/]+\/)?[^/@]+@\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?(?:\/|$)/;

function outcome(spec: string, importer: string | null): { url?: string; code?: string } {
  try {
    return { url: resolveSpecifier(spec, importer, ORIGIN).url };
  } catch (e) {
    expect(e, String(e)).to.be.instanceOf(ModuleError);
    return { code: (e as ModuleError).code };
  }
}

describe("executor: import specifiers", function () {
  it("resolves pkg@x.y.z to the package's ESM entry under the origin", function () {
    expect(resolveSpecifier("zod@3.22.4", null, ORIGIN)).to.deep.equal({ url: `${ORIGIN}zod@3.22.4/+esm` });
  });

  it("resolves a scoped package with a file path, keeping the path", function () {
    expect(resolveSpecifier("@preact/render@6.4.1/dist/x.js", null, ORIGIN).url).to.equal(
      `${ORIGIN}@preact/render@6.4.1/dist/x.js`,
    );
  });

  it("separates an inline #sha384 from the URL", function () {
    const hash = "sha384-" + "A".repeat(64);
    expect(resolveSpecifier(`zod@3.22.4#${hash}`, null, ORIGIN)).to.deep.equal({
      url: `${ORIGIN}zod@3.22.4/+esm`,
      integrity: hash,
    });
  });

  it("resolves a module's absolute path against the module's URL", function () {
    expect(resolveSpecifier("/npm/dep@1.0.0/+esm", `${ORIGIN}zod@3.22.4/+esm`, ORIGIN).url).to.equal(
      `${ORIGIN}dep@1.0.0/+esm`,
    );
  });

  it("refuses a module path to an unpinned package with import_not_pinned", function () {
    expect(outcome("/npm/dep@latest/+esm", `${ORIGIN}zod@3.22.4/+esm`).code).to.equal("import_not_pinned");
  });

  it("accepts only URLs under the origin with an exact version, for any specifier (property)", function () {
    const piece = fc.constantFrom(
      "zod",
      "@scope/pkg",
      "@",
      "/",
      "./",
      "../",
      "..",
      "#",
      "%2e%2e",
      "%2F",
      "?q",
      "latest",
      "^1.2.3",
      "1.2.3",
      "1.2",
      "x",
      "+esm",
      "https://cdn.example/npm/",
      "http://cdn.example/npm/",
      "https://evil/npm/",
      "//evil/",
      "\\",
      ":",
      "user:pw@",
      "sha384-",
      "A".repeat(64),
      " ",
      "\n",
    );
    const importer = fc.constantFrom(null, `${ORIGIN}zod@3.22.4/+esm`, `${ORIGIN}@s/p@1.0.0/a/b.js`);
    fc.assert(
      fc.property(fc.array(piece, { minLength: 1, maxLength: 8 }), importer, (parts, from) => {
        const spec = parts.join("");
        const r = outcome(spec, from);
        if (r.url === undefined) return;
        expect(r.url.startsWith(ORIGIN), `${spec} → ${r.url}`).to.equal(true);
        const rest = decodeURIComponent(r.url.slice(ORIGIN.length));
        expect(EXACT.test(rest), `${spec} → ${r.url}`).to.equal(true);
        expect(r.url).to.not.match(/[?#]/);
      }),
      { numRuns: 3000 },
    );
  });

  it("never accepts a version that is not exact (property)", function () {
    const inexact = fc.oneof(
      fc.constantFrom(
        "latest",
        "next",
        "*",
        "x",
        "1",
        "1.2",
        "1.x",
        "1.2.x",
        "^1.2.3",
        "~1.2.3",
        ">=1.0.0",
        "1.2.3 - 2",
      ),
      fc.string({ maxLength: 6 }).filter((v) => !/^\d+\.\d+\.\d+/.test(v)),
    );
    fc.assert(
      fc.property(inexact, (v) => {
        expect(outcome(`pkg@${v}`, null).url, v).to.equal(undefined);
      }),
      { numRuns: 2000 },
    );
  });
});
