/**
 * Reading what a node's JSON-RPC error means. Ethers wraps the node's error object (sometimes twice),
 * so each question walks the chain of wrapped errors rather than trusting the outermost message.
 */

/** JSON-RPC error objects carried by an ethers error, outermost first. */
export function rpcErrors(err: unknown): Array<{ code?: unknown; message?: unknown; data?: unknown }> {
  const out = [];
  for (let e: unknown = err, d = 0; e && typeof e === "object" && d < 5; d++) {
    out.push(e as { code?: unknown; message?: unknown; data?: unknown });
    const o = e as { info?: { error?: unknown }; error?: unknown; cause?: unknown };
    e = o.info?.error ?? o.error ?? o.cause;
  }
  return out;
}

/** JSON-RPC -32601 (or a node's wording of it): the node does not have the method. */
export function isMethodUnsupported(err: unknown): boolean {
  return rpcErrors(err).some(
    (e) =>
      e.code === -32601 ||
      (typeof e.message === "string" &&
        /method not found|method .*(not supported|not available|does not exist)|unsupported method/i.test(
          e.message,
        )),
  );
}

/** Our own request timeout (transport.ts: code TIMEOUT), as opposed to a refused or reset connection. */
export function isTimeout(err: unknown): boolean {
  return rpcErrors(err).some((e) => e.code === "TIMEOUT");
}

/** EIP-7966 error 4 (accepted, not mined within the node's timeout): the transaction hash it carries. */
export function pendingHash(err: unknown): string | null {
  for (const e of rpcErrors(err)) {
    if (e.code === 4 && typeof e.data === "string" && /^0x[0-9a-fA-F]{64}$/.test(e.data)) return e.data;
  }
  return null;
}

/** Every message of the wrapped errors, joined: nodes word the same refusal differently. */
export function errorText(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, d = 0; e && d < 5; d++) {
    const o = e as {
      message?: unknown;
      shortMessage?: unknown;
      info?: { error?: unknown };
      error?: unknown;
      cause?: unknown;
    };
    if (typeof o.message === "string") parts.push(o.message);
    if (typeof o.shortMessage === "string") parts.push(o.shortMessage);
    e = o.info?.error ?? o.error ?? o.cause;
  }
  return parts.join(" | ");
}
