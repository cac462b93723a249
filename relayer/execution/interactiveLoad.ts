/**
 * Whether this instance is serving interactive runs (an execution somebody waits for on the line, as
 * opposed to a triggered run): runAction counts them, the trigger runner reads it to hold its runs
 * back while they last (relayer/triggers/backgroundGate.ts, docs/triggers.md, "Performance").
 */
import { performance } from "node:perf_hooks";

/**
 * How long after the last interactive run ended the load still counts as present: a client that
 * loops over its requests has a gap between two runs (its answer, its next request), and a triggered
 * run started in that gap would compete with the next one.
 */
export const INTERACTIVE_LINGER_MS = 250;

export class InteractiveLoad {
  private inFlight = 0;
  private lastEndedMs = -Infinity;

  constructor(
    private readonly lingerMs = INTERACTIVE_LINGER_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** An interactive run begins; call the answer once when it ends (however it ends). */
  begin(): () => void {
    this.inFlight++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.inFlight--;
      this.lastEndedMs = this.now();
    };
  }

  /** Some interactive run is in flight, or one ended less than the linger ago. */
  present(): boolean {
    return this.inFlight > 0 || this.now() - this.lastEndedMs < this.lingerMs;
  }
}

/** One per relayer (its context): instances in one process (the tests') do not see each other's load. */
const loads = new WeakMap<object, InteractiveLoad>();

export function interactiveLoadOf(ctx: object): InteractiveLoad {
  let load = loads.get(ctx);
  if (load === undefined) loads.set(ctx, (load = new InteractiveLoad()));
  return load;
}
