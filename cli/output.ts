/**
 * Everything the CLI prints. Results go to stdout (human text, or JSON with --json); progress and
 * errors go to stderr so that `--json` output stays machine-readable.
 */

export interface OutputOptions {
  json: boolean;
  quiet: boolean;
}

export class Output {
  constructor(
    readonly opts: OutputOptions,
    private readonly out: NodeJS.WritableStream = process.stdout,
    private readonly err: NodeJS.WriteStream | NodeJS.WritableStream = process.stderr,
  ) {}

  /** Prints a result: `value` as JSON with --json, else the human rendering. */
  result(value: unknown, human: () => string): void {
    this.out.write(this.opts.json ? JSON.stringify(value, null, 2) + "\n" : human().replace(/\n?$/, "\n"));
  }

  note(message: string): void {
    if (!this.opts.quiet) this.err.write(message + "\n");
  }

  error(message: string): void {
    this.err.write(message + "\n");
  }

  /**
   * Shows that something is waiting (typically for a transaction to land). On a terminal a spinner with
   * the elapsed time; elsewhere one line when it starts and one when it ends: ✓, or ✗ when it threw or
   * `failed` says its value is a failure (an action that threw, answered 200).
   */
  async progress<T>(label: string, work: Promise<T>, failed?: (value: T) => boolean): Promise<T> {
    if (this.opts.quiet) return work;
    const mark = (v: T) => (failed?.(v) ? "✗" : "✓");
    const tty = (this.err as NodeJS.WriteStream).isTTY === true;
    const started = Date.now();
    const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;
    if (!tty) {
      this.err.write(`… ${label}\n`);
      try {
        const v = await work;
        this.err.write(`${mark(v)} ${label} (${elapsed()})\n`);
        return v;
      } catch (e) {
        this.err.write(`✗ ${label} (${elapsed()})\n`);
        throw e;
      }
    }
    const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
    let i = 0;
    const draw = () => this.err.write(`\r${frames[i++ % frames.length]} ${label} ${elapsed()}`);
    draw();
    const timer = setInterval(draw, 80);
    try {
      const v = await work;
      this.err.write(`\r${mark(v)} ${label} (${elapsed()})\x1b[K\n`);
      return v;
    } catch (e) {
      this.err.write(`\r✗ ${label} (${elapsed()})\x1b[K\n`);
      throw e;
    } finally {
      clearInterval(timer);
    }
  }
}

/** A plain text table: header row, then rows, columns padded to their widest cell. */
export function table(headers: string[], rows: string[][]): string {
  if (rows.length === 0) return "(none)";
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i])))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

/** "key  value" lines, keys aligned. Undefined values are skipped. */
export function fields(pairs: [string, unknown][]): string {
  const shown = pairs.filter(([, v]) => v !== undefined && v !== null);
  const width = Math.max(...shown.map(([k]) => k.length));
  return shown
    .map(([k, v]) => `${k.padEnd(width)}  ${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join("\n");
}

export function list(v: unknown): string {
  if (!Array.isArray(v)) return v === undefined || v === null ? "" : String(v);
  return v.length === 0 ? "-" : v.join(",");
}

/** Group ids of a permission for people: the wildcard 0 reads "all groups". */
export function groupList(v: unknown): string {
  if (Array.isArray(v) && v.some((x) => x === 0 || x === "0")) return "all groups";
  return list(v);
}

/**
 * A ledger or registry time for people: the API speaks unix seconds (1795315106), a table shows
 * "2026-11-22 02:38:26Z". Anything that is not a plausible unix time is shown as it is.
 */
export function when(v: unknown): string {
  const seconds = typeof v === "number" ? v : typeof v === "string" && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(seconds) || seconds <= 0) return v === undefined || v === null ? "" : String(v);
  return new Date(seconds * 1000)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d{3}Z$/, "Z");
}
