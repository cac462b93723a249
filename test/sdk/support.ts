/**
 * Test helpers for the SDK: a recording HTTP proxy (everything that crosses the wire between the SDK
 * and the relayer, byte for byte) and a front that answers chosen requests itself (retry tests).
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

export interface Exchange {
  method: string;
  url: string;
  requestHeaders: http.IncomingHttpHeaders;
  requestBody: Buffer;
  status: number;
  responseHeaders: http.IncomingHttpHeaders;
  responseBody: Buffer;
}

export interface Front {
  url: string;
  exchanges: Exchange[];
  close(): Promise<void>;
}

/** What the front may do with a request instead of forwarding it (return null to forward). */
export type Intercept = (
  req: { method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer },
  nth: number,
) => { status: number; headers?: Record<string, string>; body: unknown; afterForwarding?: boolean } | null;

export async function startFront(target: string, intercept?: Intercept): Promise<Front> {
  const exchanges: Exchange[] = [];
  let n = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks);
      const record = (status: number, headers: http.IncomingHttpHeaders, responseBody: Buffer) =>
        exchanges.push({
          method: req.method!,
          url: req.url!,
          requestHeaders: req.headers,
          requestBody: body,
          status,
          responseHeaders: headers,
          responseBody,
        });
      const own = intercept?.({ method: req.method!, url: req.url!, headers: req.headers, body }, n++);
      if (own && !own.afterForwarding) {
        const out = Buffer.from(JSON.stringify(own.body));
        const headers = { "content-type": "application/json", ...(own.headers ?? {}) };
        record(own.status, headers, out);
        res.writeHead(own.status, headers).end(out);
        return;
      }
      const forwarded: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers))
        if (typeof v === "string" && !["host", "connection", "content-length"].includes(k)) forwarded[k] = v;
      try {
        const r = await fetch(target + req.url, {
          method: req.method,
          headers: forwarded,
          body: body.length ? body : undefined,
        });
        const out = Buffer.from(await r.arrayBuffer());
        const headers: Record<string, string> = {};
        r.headers.forEach((v, k) => {
          if (!["content-length", "connection", "keep-alive", "transfer-encoding"].includes(k))
            headers[k] = v;
        });
        if (own?.afterForwarding) {
          // The service did the work; the client hears something else (a lost or failed answer).
          const replaced = Buffer.from(JSON.stringify(own.body));
          const h = { "content-type": "application/json", ...(own.headers ?? {}) };
          record(own.status, h, replaced);
          res.writeHead(own.status, h).end(replaced);
          return;
        }
        record(r.status, headers, out);
        res.writeHead(r.status, headers).end(out);
      } catch (err) {
        res.writeHead(502).end(String(err));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exchanges,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Every byte that crossed the wire, both ways, as one string per encoding worth searching. */
export function wireText(exchanges: Exchange[]): string {
  return exchanges
    .map((e) =>
      [
        e.method,
        e.url,
        JSON.stringify(e.requestHeaders),
        e.requestBody.toString("latin1"),
        JSON.stringify(e.responseHeaders),
        e.responseBody.toString("latin1"),
      ].join("\n"),
    )
    .join("\n");
}

/** README.md's signature check (walk-through step 7): the `node -e '…'` program, as written there. */
export function readmeSignatureCheck(readme: string): string {
  const m = /^node -e '(.+)' "hello from Sigil" 0x\.\.\. \$PKP_ADDRESS/m.exec(readme);
  if (!m) throw new Error("README.md no longer contains step 7's node -e signature check");
  return m[1];
}

/** README.md's TypeScript program (the walk-through's "The same from TypeScript"). */
export function readmeProgram(readme: string): string {
  const m = /```ts\n(import \{ createSigil \} from "sigil\/sdk";[\s\S]*?)```/.exec(readme);
  if (!m) throw new Error("README.md no longer contains the walk-through's TypeScript program");
  return m[1];
}
