/**
 * The migration command's progress on stderr: a bar redrawn in place on a terminal (accounts done / total,
 * the account being rebuilt), plain lines otherwise (logs and CI keep every step, and a supervising
 * program can read them).
 */
export interface ProgressOutput {
  isTTY?: boolean;
  columns?: number;
  write(text: string): unknown;
}

const WIDTH = 30;

export class MigrationProgress {
  private done = 0;

  constructor(
    private readonly out: ProgressOutput,
    private readonly total: number,
  ) {}

  /** An account already rebuilt by an earlier, interrupted run. */
  skipped(accountId: bigint): void {
    this.done++;
    if (this.out.isTTY) this.draw(`account ${accountId} already done`);
    else this.out.write(`account ${accountId} already migrated (earlier run), ${this.done}/${this.total}\n`);
  }

  starting(accountId: bigint): void {
    if (this.out.isTTY) this.draw(`account ${accountId}`);
    else this.out.write(`migrating account ${accountId} (${this.done}/${this.total} done)\n`);
  }

  finished(accountId: bigint, writes: number): void {
    this.done++;
    if (this.out.isTTY) this.draw(`account ${accountId} done`);
    else this.out.write(`account ${accountId} done: ${writes} writes, ${this.done}/${this.total}\n`);
  }

  /** Ends the bar's line so that what follows starts on a fresh one. */
  end(): void {
    if (this.out.isTTY) this.out.write("\n");
  }

  private draw(current: string): void {
    const filled = this.total === 0 ? WIDTH : Math.round((WIDTH * this.done) / this.total);
    const bar = "#".repeat(filled) + ".".repeat(WIDTH - filled);
    const line = `[${bar}] ${this.done}/${this.total} accounts · ${current}`;
    this.out.write(`\r${line.slice(0, (this.out.columns ?? 80) - 1).padEnd((this.out.columns ?? 80) - 1)}`);
  }
}
