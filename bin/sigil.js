#!/usr/bin/env node
// `npx sigil`: registers ts-node (transpile only: fast, no type checking at run time) and runs the CLI
// written in TypeScript, so the repository needs no build step before the CLI works.
"use strict";
const path = require("node:path");

require("ts-node").register({
  transpileOnly: true,
  project: path.join(__dirname, "..", "tsconfig.json"),
  compilerOptions: { module: "commonjs" },
});
require(path.join(__dirname, "..", "cli", "index.ts")).main();
