/** Paths of the executor's thread scripts (plain JavaScript: threads do not load TypeScript). */
import path from "node:path";

export const WORKER_SCRIPT = path.join(__dirname, "worker", "sandbox-worker.js");
export const SIGNER_SCRIPT = path.join(__dirname, "worker", "signer-thread.js");
