/**
 * A real HTTP receiver for webhook tests: records every request (headers, raw body, time) and answers
 * what the test programs: a status per attempt, a redirect, or no answer at all (hang).
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export type Behaviour = { status: number; location?: string } | "hang";

export class Receiver {
  readonly received: Received[] = [];
  /** Requests answered with no answer yet (hanging). */
  readonly hanging = new Set<http.ServerResponse>();
  private readonly server: http.Server;
  /** What to answer: called with the number of requests so far (1 for the first). */
  behaviour: (n: number, r: Received) => Behaviour = () => ({ status: 200 });
  url = "";

  constructor() {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const r: Received = {
          headers: req.headers,
          body: Buffer.concat(chunks).toString("utf8"),
          at: Date.now(),
        };
        this.received.push(r);
        const b = this.behaviour(this.received.length, r);
        if (b === "hang") {
          this.hanging.add(res);
          res.on("close", () => this.hanging.delete(res));
          return;
        }
        res.writeHead(b.status, b.location ? { location: b.location } : {});
        res.end("ok");
      });
    });
  }

  async start(path = "/hook"): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
    return this;
  }

  events(): Array<{
    id: string;
    type: string;
    block_number?: number;
    transaction_hash?: string;
    log_index?: number;
    data: Record<string, unknown>;
  }> {
    return this.received.map((r) => JSON.parse(r.body));
  }

  async until(probe: () => boolean, limitMs = 20_000): Promise<void> {
    const t0 = Date.now();
    while (!probe()) {
      if (Date.now() - t0 > limitMs) throw new Error(`receiver: condition not met within ${limitMs} ms`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
