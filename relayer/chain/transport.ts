/**
 * HTTP transport for the JSON-RPC provider with persistent connections. ethers' default Node transport
 * opens a new TCP connection per request; on a local chain that is most of an RPC's latency, and a
 * path-A write makes several RPCs. The timeout still comes from the FetchRequest (per request).
 */
import * as http from "node:http";
import * as https from "node:https";
import type { FetchGetUrlFunc, FetchRequest } from "ethers";

export function keepAliveTransport(): {
  getUrl: FetchGetUrlFunc;
  agentFor(url: URL): http.Agent | https.Agent | undefined;
  destroy(): void;
} {
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
    agentFor: (url: URL) => agents[url.protocol as "http:" | "https:"],
    destroy() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}

/**
 * One JSON-RPC POST over a persistent connection, answered with the parsed JSON. This is the provider's
 * whole transport (see LeanJsonRpcProvider in rpc.ts): ethers' FetchRequest copies the request, decodes
 * the body with its own UTF-8 decoder and wraps everything in throttling logic, which together cost more
 * than the HTTP exchange itself on a local chain. Failures keep the shapes the RPC error classification
 * expects: socket errors keep their code (ECONNREFUSED, ECONNRESET, ...), a timeout is code TIMEOUT, a
 * non-2xx status or a body that is not JSON is code SERVER_ERROR.
 */
export function postJson(
  url: URL,
  agent: http.Agent | https.Agent,
  body: string,
  timeoutMs: number,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const mod = url.protocol === "https:" ? https : http;
    const data = Buffer.from(body);
    const r = mod.request(
      url,
      {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": String(data.length) },
        agent,
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          const text = Buffer.concat(chunks).toString("utf8");
          if (status < 200 || status >= 300) {
            // JSON-RPC servers may answer an error object with a non-2xx status; keep it if it is one.
            try {
              const parsed = JSON.parse(text) as { error?: unknown };
              if (parsed && typeof parsed === "object" && "error" in parsed) return resolve(parsed);
            } catch {
              // fall through
            }
            return reject(
              Object.assign(new Error(`server response ${status} ${res.statusMessage ?? ""}`), {
                code: "SERVER_ERROR",
              }),
            );
          }
          try {
            resolve(JSON.parse(text));
          } catch {
            reject(Object.assign(new Error("invalid JSON-RPC response body"), { code: "SERVER_ERROR" }));
          }
        });
      },
    );
    r.on("timeout", () => r.destroy(Object.assign(new Error("request timeout"), { code: "TIMEOUT" })));
    r.on("error", reject);
    r.end(data);
  });
}
