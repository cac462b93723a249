/**
 * Builds the dashboard into static files (dashboard/dist) that the relayer serves at `/`.
 * `npm run build:dashboard` runs it; `npm install` (prepare) and `npm start` (when stale) too.
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";
import { firstPageBudget } from "./buildBudget.mts";

const here = fileURLToPath(new URL(".", import.meta.url));

export default defineConfig({
  root: here,
  base: "/",
  plugins: [react(), firstPageBudget({ maxGzipBytes: 250 * 1024 })],
  resolve: {
    alias: {
      // The SDK signs requests with node:crypto (sha256, random nonce); the browser gets the same two
      // functions from a shim (src/shims/nodeCrypto.ts). The SDK itself is not edited here.
      "node:crypto": fileURLToPath(new URL("./src/shims/nodeCrypto.ts", import.meta.url)),
    },
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    reportCompressedSize: true,
    chunkSizeWarningLimit: 600,
  },
  logLevel: "info",
});
