/**
 * Test scaffolding for billing's HTTP layer: a tiny Express app that mounts the billing router the
 * way the relayer does, with a real `requireAccountKey` stand-in (the header X-Test-Account names
 * the account; X-Test-Usage-Key makes it a usage key, which billing must refuse).
 */
import express from "express";
import { createHash } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiError } from "../../relayer/errors";
import { type Billing, type ForwardRequestId, type Principal } from "../../relayer/billing";

export function tempDir(prefix = "sigil-billing-"): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export function principalFor(
  accountId: string,
  kind: "account" | "usage" = "account",
  keyAddress?: string,
): Principal {
  const hex = BigInt(accountId)
    .toString(16)
    .padStart(kind === "account" ? 40 : 38, "0");
  return { accountId, kind, keyAddress: keyAddress ?? (kind === "account" ? "0x" + hex : "0xEE" + hex) };
}

export const testAccountKey: express.RequestHandler = (req, res, next) => {
  const account = req.get("x-test-account");
  if (!account || !/^[0-9]+$/.test(account)) return next(new ApiError("missing_api_key", "no key"));
  res.locals.principal = principalFor(account, req.get("x-test-usage-key") ? "usage" : "account");
  next();
};

/** A parsed JSON answer: tests index into it freely and assert on the values. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface TestServer {
  url: string;
  close(): Promise<void>;
  /** JSON request helper: returns status, parsed body and headers. */
  call(
    method: string,
    path: string,
    opts?: { account?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> },
  ): Promise<{ status: number; body: Json; headers: Headers }>;
}

export async function serve(billing: Billing): Promise<TestServer> {
  const app = express();
  app.use("/core/v1/billing", billing.router(testAccountKey));
  // What the relayer mounts after billing: its own JSON parser must not have touched billing's bodies.
  app.use(express.json());
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
    call: (method, path, opts = {}) => httpCall(url, method, path, opts),
  };
}

export async function httpCall(
  url: string,
  method: string,
  path: string,
  opts: { account?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Json; headers: Headers }> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.account) headers["x-test-account"] = opts.account;
  let body: string | undefined = opts.rawBody;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] = "application/json";
  }
  const res = await fetch(url + "/core/v1/billing" + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON: keep the text */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/**
 * A forward request to charge a write for, named by a label (same label, same request): the chain,
 * forwarder and signer are fixed, the nonce is derived from the label.
 */
export function forwardRequest(label: string, signer = "0x" + "5".repeat(40)): ForwardRequestId {
  const nonce = BigInt("0x" + createHash("sha256").update(label).digest("hex").slice(0, 12));
  return { chainId: 31337, forwarder: "0x" + "f".repeat(40), signer, nonce };
}
