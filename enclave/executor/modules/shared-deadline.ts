/**
 * The deadline of work shared by several runs (one module fetch that several runs wait for): it is the
 * latest deadline of the runs waiting, never the first one's. A run that joins later with a later
 * deadline pushes it back; each run still stops waiting at its own deadline (loader.ts, withDeadline),
 * so no run waits longer than it allows, and a run that leaves early does not cut the others short.
 */
export class SharedDeadline {
  readonly #controller = new AbortController();
  #deadline: number;
  #timer: NodeJS.Timeout | null = null;

  constructor(deadline: number) {
    this.#deadline = deadline;
    this.#arm();
  }

  /** Aborted when the latest deadline has passed. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** A run with this deadline waits too: the work may go on until then. */
  extend(deadline: number): void {
    if (deadline <= this.#deadline || this.#timer === null) return;
    this.#deadline = deadline;
    clearTimeout(this.#timer);
    this.#arm();
  }

  /** The work is over: no abort any more. */
  done(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #arm(): void {
    this.#timer = setTimeout(
      () => {
        this.#timer = null;
        this.#controller.abort();
      },
      Math.max(0, this.#deadline - Date.now()),
    );
  }
}
