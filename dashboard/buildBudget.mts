/**
 * The first-page JavaScript budget, enforced at build time: the entry chunk plus every chunk it imports
 * statically (what the browser must fetch before the first paint), gzipped. Lazy chunks (the code
 * editor, Stripe) are not counted: they load when a page needs them. Prints the sizes; fails the build
 * over budget, so a heavy import on the first page is caught where it is made.
 */
import { gzipSync } from "node:zlib";
import type { Plugin } from "vite";

interface ChunkLike {
  type: "chunk" | "asset";
  fileName: string;
  isEntry?: boolean;
  imports?: string[];
  code?: string;
  source?: string | Uint8Array;
}

export function firstPageBudget(o: { maxGzipBytes: number }): Plugin {
  return {
    name: "sigil-first-page-budget",
    apply: "build",
    generateBundle(_options, bundle) {
      const chunks = bundle as unknown as Record<string, ChunkLike>;
      const gz = (c: ChunkLike) => gzipSync(Buffer.from(c.code ?? c.source ?? "")).length;
      const first = new Set<string>();
      const visit = (name: string) => {
        if (first.has(name) || !chunks[name]) return;
        first.add(name);
        for (const dep of chunks[name].imports ?? []) visit(dep);
      };
      for (const c of Object.values(chunks)) if (c.type === "chunk" && c.isEntry) visit(c.fileName);
      const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
      let firstTotal = 0;
      const lines: string[] = [];
      for (const c of Object.values(chunks)) {
        if (c.type !== "chunk") continue;
        const size = gz(c);
        if (first.has(c.fileName)) firstTotal += size;
        lines.push(
          `  ${first.has(c.fileName) ? "first page" : "on demand "}  ${kb(size).padStart(9)}  ${c.fileName}`,
        );
      }
      console.log(`\nDashboard JavaScript (gzip):\n${lines.join("\n")}`);
      console.log(`  first page total: ${kb(firstTotal)} (budget ${kb(o.maxGzipBytes)})\n`);
      if (firstTotal > o.maxGzipBytes)
        this.error(
          `The first page needs ${kb(firstTotal)} of JavaScript (gzip), over the ${kb(o.maxGzipBytes)} budget.`,
        );
    },
  };
}
