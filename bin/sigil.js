#!/usr/bin/env node
// `npx sigil`: runs the CLI written in TypeScript (cli/), so the repository needs no build step.
//
// Like `ts-node --transpile-only`, each .ts file is transpiled on its own without type checking, with
// TypeScript's transpileModule. Unlike ts-node, the output is cached in node_modules/.cache/sigil-cli,
// keyed by a hash of the TypeScript version, the file's path in the repository and its exact source, so a later run skips
// loading the TypeScript compiler: about 0.1 s per command instead of 1–2 s. A stale entry cannot be
// used (any edit changes the key), and if the cache cannot be read or written the CLI still runs.
"use strict";
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");

const ROOT = path.join(__dirname, "..");
const CACHE_DIR = path.join(ROOT, "node_modules", ".cache", "sigil-cli");
const TS_VERSION = require("typescript/package.json").version;

let typescript;
function transpile(source, filename) {
  typescript ??= require("typescript");
  return typescript.transpileModule(source, {
    fileName: filename,
    compilerOptions: {
      module: typescript.ModuleKind.CommonJS,
      target: typescript.ScriptTarget.ES2022,
      esModuleInterop: true,
      inlineSourceMap: true,
    },
  }).outputText;
}

function cachedTranspile(source, filename) {
  // Keyed by the path inside the repository, so that copies of the checkout share entries.
  const relative = path.relative(ROOT, filename);
  const key = crypto.createHash("sha256").update(`${TS_VERSION}\0${relative}\0${source}`).digest("hex");
  const file = path.join(CACHE_DIR, `${key}.js`);
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    // not cached yet
  }
  const js = transpile(source, relative);
  try {
    fs.mkdirSync(CACHE_DIR, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`; // write-then-rename: concurrent runs never read half a file
    fs.writeFileSync(tmp, js);
    fs.renameSync(tmp, file);
  } catch {
    // read-only checkout: run uncached
  }
  return js;
}

require.extensions[".ts"] = function loadTypeScript(module, filename) {
  module._compile(cachedTranspile(fs.readFileSync(filename, "utf8"), filename), filename);
};

require(path.join(ROOT, "cli", "index.ts")).main();
