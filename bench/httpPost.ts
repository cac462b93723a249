/** The one HTTP POST of the benchmarks: bytes out, status and body text back, over a keep-alive agent. */
import * as http from "node:http";

export const keepAliveAgent = (): http.Agent => new http.Agent({ keepAlive: true, maxSockets: 256 });

/**
 * Whether a failed request went out on a kept-alive socket that the server had just closed as idle:
 * the server times idle sockets out after 5 s (`keepAliveTimeout`) and the agent drops its free ones
 * after the same 5 s (the answer's `Keep-Alive: timeout=5`), so a request can leave on a socket whose
 * close is already on its way. Such a request was not read by the server (it closes only sockets with
 * no request in flight), so it is sent again, once, on a fresh socket: Node's documented remedy
 * (`request.reusedSocket`). A reset of a reused socket for another reason is retried the same way; in
 * a benchmark a request sent twice costs one request more. Without it a long benchmark ended now and
 * then with "socket hang up" or ECONNRESET between two phases (the race was not reproduced in a
 * short test on a quiet machine, so the remedy is Node's, not a measurement's).
 */
function closedWhileIdle(req: http.ClientRequest, err: unknown, answered: boolean): boolean {
  return !answered && req.reusedSocket && (err as { code?: string }).code === "ECONNRESET";
}

export function postBytes(
  agent: http.Agent,
  url: string,
  data: Buffer,
  headers: Record<string, string> = {},
  retried = false,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request(
      url,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": String(data.length), ...headers },
      },
      (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on("error", reject);
      },
    );
    req.on("error", (err) => {
      if (!retried && closedWhileIdle(req, err, answered))
        postBytes(agent, url, data, headers, true).then(resolve, reject);
      else reject(err);
    });
    req.end(data);
  });
}
