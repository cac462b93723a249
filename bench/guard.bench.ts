/**
 * The HTTP guard's cost per body: the JSON depth scan (relayer/http/guard.ts) against JSON.parse of the
 * same bytes, measured in the same run. JSON.parse is the baseline because every JSON request pays it
 * anyway; the scan runs once more over the same bytes, before it.
 *
 *   npm run bench:guard
 */
import { assertJsonDepth, MAX_JSON_DEPTH } from "../relayer/http/guard";

function measure(fn: () => void, iterations: number): number {
  for (let i = 0; i < Math.min(200, iterations); i++) fn();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) fn();
  return Number(process.hrtime.bigint() - t0) / iterations / 1e3;
}

function row(label: string, body: Buffer, iterations: number): void {
  const scan = measure(() => {
    try {
      assertJsonDepth(body, MAX_JSON_DEPTH);
    } catch {
      // json_too_deep: the refusal is what is measured
    }
  }, iterations);
  const parse = measure(() => {
    try {
      JSON.parse(body.toString("utf8"));
    } catch {
      // V8 parses deep nesting iteratively; nothing to catch in practice
    }
  }, iterations);
  console.log(
    `${label.padEnd(34)} ${String(body.length).padStart(8)} B   scan ${scan.toFixed(2).padStart(8)} µs` +
      `   JSON.parse ${parse.toFixed(2).padStart(8)} µs   scan/parse ${(scan / parse).toFixed(2)}`,
  );
}

const cid = "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o";
row(
  "svc_action (cid, pkp_id, js_params)",
  Buffer.from(
    JSON.stringify({ cid, pkp_id: "0x" + "ab".repeat(32), js_params: { who: "world", n: [1, 2, 3] } }),
  ),
  50_000,
);
row(
  "groups (name, 64 PKP ids)",
  Buffer.from(
    JSON.stringify({
      name: "g",
      pkps: Array.from({ length: 64 }, (_, i) => "0x" + String(i).padStart(64, "0")),
    }),
  ),
  10_000,
);
row("inline code 256 KB", Buffer.from(JSON.stringify({ code: "let x = 1;\n".repeat(23_800) })), 500);
row(
  "js_params 64 KB of small objects",
  Buffer.from(
    JSON.stringify({ code: "x", js_params: Array.from({ length: 2_500 }, (_, i) => ({ i, s: "abc" })) }),
  ),
  500,
);
row("1 MiB of nested arrays, refused at 33", Buffer.from("[".repeat(524_288) + "]".repeat(524_288)), 500);
