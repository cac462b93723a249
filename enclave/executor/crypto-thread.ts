/**
 * The main thread's client of the executor's crypto thread (worker/signer-thread.js, second instance):
 * once the main thread has authorized a key operation that costs real CPU (encryption, decryption,
 * signatures by a PKP other than the run's own), it derives that one PKP key, sends it with the
 * arguments to the crypto thread, and relays the answer (docs/actions.md, "Key operations off the main
 * thread"). The key is copied into the request and the main thread's copy zeroed at once; the thread
 * zeroes its own after answering. Nothing of it reaches an action worker.
 *
 * One thread per process, started on first use, never terminated (the secp256k1 binding must not be
 * loaded after a thread that loaded it has ended: signer-thread.js), and unref'd so that it never keeps
 * the process alive. If it cannot start or dies, every request answers null and the caller serves the
 * operation in the main thread, as before this thread existed.
 */
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import { SIGNER_SCRIPT } from "./pool-paths";

/** What the thread answered: `value` for the action, `failed` (decrypt only) for decryption_failed. */
export interface CryptoAnswer {
  value?: unknown;
  failed?: string;
  /** The digest a message or typed-data signature was made over (for the run's key-operation record). */
  digest?: Uint8Array;
}

export interface CryptoRequest {
  op: "signDigest" | "signMessage" | "signTypedData" | "signEd25519" | "signSchnorr" | "encrypt" | "decrypt";
  [field: string]: unknown;
}

export class CryptoThreadClient {
  private readonly pending = new Map<number, (answer: CryptoAnswer | null) => void>();
  private nextId = 1;
  private closed = false;

  constructor(private readonly port: MessagePort) {
    port.on("message", (m: { id?: unknown; ok?: unknown } & CryptoAnswer) => {
      const resolve = typeof m?.id === "number" ? this.pending.get(m.id) : undefined;
      if (resolve === undefined) return;
      this.pending.delete(m.id as number);
      resolve(m.ok === true ? { value: m.value, failed: m.failed, digest: m.digest } : null);
    });
    port.on("close", () => this.fail());
    port.unref();
  }

  /**
   * Ask for one operation with `key` (copied into the message; this function zeroes the caller's
   * array before it returns). Resolves null when the thread cannot answer exactly as the enclave would.
   */
  request(req: CryptoRequest, key: Uint8Array): Promise<CryptoAnswer | null> {
    try {
      if (this.closed) return Promise.resolve(null);
      const id = this.nextId++;
      return new Promise((resolve) => {
        this.pending.set(id, resolve);
        this.port.postMessage({ ...req, id, key });
      });
    } finally {
      key.fill(0);
    }
  }

  private fail(): void {
    this.closed = true;
    for (const resolve of this.pending.values()) resolve(null);
    this.pending.clear();
  }
}

let shared: CryptoThreadClient | null | undefined;

/** The process's crypto thread (started on first call), or null if it cannot run. */
export function cryptoThread(): CryptoThreadClient | null {
  if (shared !== undefined) return shared;
  try {
    const thread = new Worker(SIGNER_SCRIPT, { name: "sigil-crypto", env: {}, execArgv: [] });
    thread.unref();
    const gone = () => {
      shared = null;
    };
    thread.on("error", gone);
    thread.on("exit", gone);
    const { port1, port2 } = new MessageChannel();
    thread.postMessage({ type: "attach", port: port1 }, [port1]);
    shared = new CryptoThreadClient(port2);
  } catch {
    shared = null;
  }
  return shared;
}
