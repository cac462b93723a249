/**
 * HTTP transport for the JSON-RPC provider with persistent connections. ethers' default Node transport
 * opens a new TCP connection per request; on a local chain that is most of an RPC's latency, and a
 * path-A write makes several RPCs. The timeout still comes from the FetchRequest (per request).
 */
import * as http from "node:http";
import * as https from "node:https";
import type { FetchGetUrlFunc, FetchRequest } from "ethers";

export function keepAliveTransport(): { getUrl: FetchGetUrlFunc; destroy(): void } {
  const agents = {
    "http:": new http.Agent({ keepAlive: true, maxSockets: 64 }),
    "https:": new https.Agent({ keepAlive: true, maxSockets: 64 }),
  };
  const getUrl: FetchGetUrlFunc = (req: FetchRequest, signal) =>
    new Promise((resolve, reject) => {
      const url = new URL(req.url);
      const mod = url.protocol === "https:" ? https : http;
      const agent = agents[url.protocol as "http:" | "https:"];
      if (!agent) {
        reject(new Error(`unsupported protocol ${url.protocol}`));
        return;
      }
      const body = req.body ? Buffer.from(req.body) : undefined;
      const headers: Record<string, string> = { ...req.headers };
      if (body) headers["content-length"] = String(body.length);
      const r = mod.request(url, { method: req.method, headers, agent, timeout: req.timeout }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const outHeaders: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers))
            if (v !== undefined) outHeaders[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
          resolve({
            statusCode: res.statusCode ?? 0,
            statusMessage: res.statusMessage ?? "",
            headers: outHeaders,
            body: new Uint8Array(Buffer.concat(chunks)),
          });
        });
        res.on("error", reject);
      });
      r.on("timeout", () => r.destroy(Object.assign(new Error("request timeout"), { code: "TIMEOUT" })));
      r.on("error", reject);
      signal?.addListener(() =>
        r.destroy(Object.assign(new Error("request cancelled"), { code: "TIMEOUT" })),
      );
      if (body) r.write(body);
      r.end();
    });
  return {
    getUrl,
    destroy() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}
