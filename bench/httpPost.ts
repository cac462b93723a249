/** The one HTTP POST of the benchmarks: bytes out, status and body text back, over a keep-alive agent. */
import * as http from "node:http";

export const keepAliveAgent = (): http.Agent => new http.Agent({ keepAlive: true, maxSockets: 256 });

export function postBytes(
  agent: http.Agent,
  url: string,
  data: Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": String(data.length), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}
