/**
 * What a worker is sent of a run's code: each worker is sent an action's code once, with the first run
 * of that CID it gets, and afterwards the CID alone; the worker keeps the code it was sent
 * (worker/code-cache.js) and reuses it, with its wrapped source, for the CID's later runs. The code
 * string is then not copied into the worker on every run, and the worker reuses one source string, so
 * V8's hash of it and its eval cache entry carry over between runs. Nothing the action can reach is
 * kept: every run still gets a new Compartment with a fresh global object.
 *
 * The CID is a name, not a guarantee: the same CID may come with other code (a caller of the executor
 * may name any CID), so what was sent under a CID is compared with the run's code, and code that
 * differs is sent whole again and replaces what the worker holds. Two CIDs never share an entry.
 *
 * One per worker, on the main thread, in the order run messages are posted to that worker: the worker
 * reads them in that order, so it holds exactly what this records. Bounded by count and by length:
 * past either it starts over, and the next message tells the worker to forget what it holds. Code too
 * long to keep is sent whole every time and not kept.
 */

/** At most this many CIDs' code held per worker. */
export const MAX_HELD_CODES = 64;
/** At most this many characters of code held per worker, all CIDs together (counts against its heap). */
export const MAX_HELD_CODE_CHARS = 2 * 1024 * 1024;

/** A run message's code fields: the code (absent: the worker holds it under the run's CID). */
export interface WireCode {
  code?: string;
  /** Keep the code sent under the run's CID (false: too long to keep, or no CID). */
  holdCode: boolean;
  /** Forget every code held before this message's (the bound was reached). */
  forgetCode: boolean;
}

export class SentCode {
  private readonly sent = new Map<string, string>();
  private chars = 0;

  /** The code fields of one run message to this worker. Call only for a message that is then posted. */
  wire(cid: string, code: string): WireCode {
    const held = this.sent.get(cid);
    if (held === code) return { holdCode: false, forgetCode: false };
    if (cid === "" || code.length > MAX_HELD_CODE_CHARS) return { code, holdCode: false, forgetCode: false };
    if (held !== undefined) {
      // Other code under the same CID: the worker replaces its entry with this one.
      this.sent.delete(cid);
      this.chars -= held.length;
    }
    let forgetCode = false;
    if (this.sent.size + 1 > MAX_HELD_CODES || this.chars + code.length > MAX_HELD_CODE_CHARS) {
      this.sent.clear();
      this.chars = 0;
      forgetCode = true;
    }
    this.sent.set(cid, code);
    this.chars += code.length;
    return { code, holdCode: true, forgetCode };
  }
}
