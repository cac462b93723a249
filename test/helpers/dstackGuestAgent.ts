/**
 * A stand-in of dstack's guest-agent HTTP API (the endpoint @phala/dstack-sdk talks to: a Unix socket in a
 * CVM, or DSTACK_SIMULATOR_ENDPOINT), the only stand-in in Sigil's tests: TDX hardware does not exist on
 * these machines. It answers the RPCs the dstack root-key provider uses (/Info, /GetKey, /GetQuote) with
 * the shapes the real agent answers, so the provider runs through the real SDK.
 *
 * What it is not: a TEE. Its keys are derived deterministically from the app id it is given (so a test can
 * restart it and get the same key, or give another app id and get another), and its quotes have the layout
 * of a TDX v4 quote (header, TD report with the requested report data and an RTMR3 that the event log
 * replays to) but no signature: DCAP verification refuses them, as it must. Tests use them for what does
 * not need Intel's signature: the report-data binding and the event-log replay.
 */
import { createHash, createHmac } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";

export interface StandInOptions {
  /** The app identity the stand-in's KMS derives keys for (hex, no 0x, as dstack writes it). */
  appId?: string;
  /** The compose hash it reports (hex, no 0x). Default: SHA-256 of a fixed app-compose text. */
  composeHash?: string;
}

export interface DstackStandIn {
  /** http://127.0.0.1:<port>: what the provider (or DSTACK_SIMULATOR_ENDPOINT) is pointed at. */
  endpoint: string;
  appId: string;
  composeHash: string;
  /** Every RPC received, path and parsed body, in order. */
  requests: Array<{ path: string; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

export const STAND_IN_APP_ID = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";
const DEFAULT_COMPOSE_HASH = createHash("sha256").update('{"name":"sigil-stand-in"}').digest("hex");
/** dstack's event type for runtime events (extended into RTMR3). */
export const DSTACK_RUNTIME_EVENT_TYPE = 0x08000001;

/** The key the stand-in's "KMS" gives `appId` for (path, purpose): what a test expects, and greps for. */
export function standInKey(appId: string, path: string, purpose: string): Buffer {
  const appKey = createHash("sha256").update(`sigil-test-dstack-stand-in/app-key/${appId}`).digest();
  return createHmac("sha256", appKey).update(`${path}\0${purpose}`).digest();
}

/** dstack's runtime event digest: SHA-384(u32le(type) ‖ ":" ‖ name ‖ ":" ‖ payload). */
function eventDigest(name: string, payload: Buffer): Buffer {
  const type = Buffer.alloc(4);
  type.writeUInt32LE(DSTACK_RUNTIME_EVENT_TYPE);
  return createHash("sha384")
    .update(Buffer.concat([type, Buffer.from(":"), Buffer.from(name), Buffer.from(":"), payload]))
    .digest();
}

function eventLogOf(appId: string, composeHash: string) {
  return [
    ["system-preparing", Buffer.alloc(0)],
    ["app-id", Buffer.from(appId, "hex")],
    ["compose-hash", Buffer.from(composeHash, "hex")],
    ["instance-id", Buffer.from("00".repeat(20), "hex")],
    ["boot-mr-done", Buffer.alloc(0)],
    ["system-ready", Buffer.alloc(0)],
  ].map(([name, payload]) => ({
    imr: 3,
    event_type: DSTACK_RUNTIME_EVENT_TYPE,
    digest: eventDigest(name as string, payload as Buffer).toString("hex"),
    event: name as string,
    event_payload: (payload as Buffer).toString("hex"),
  }));
}

function replay(digests: string[]): Buffer {
  let mr = Buffer.alloc(48);
  for (const d of digests)
    mr = createHash("sha384")
      .update(Buffer.concat([mr, Buffer.from(d, "hex")]))
      .digest();
  return mr;
}

/**
 * A TDX v4 quote's layout with no signature: 48-byte header (version 4, ECDSA-P256 key type 2, TEE type
 * 0x81), the 584-byte TD report (MRTD at 136, RTMR0–3 from 328, REPORTDATA at 520), then an empty
 * signature section.
 */
function unsignedQuote(reportData: Buffer, rtmr3: Buffer): Buffer {
  const header = Buffer.alloc(48);
  header.writeUInt16LE(4, 0);
  header.writeUInt16LE(2, 2);
  header.writeUInt32LE(0x81, 4);
  header.write("SIGIL-STAND-IN", 28, "ascii"); // user data: plainly not a real quoting enclave
  const body = Buffer.alloc(584);
  createHash("sha384").update("stand-in MRTD").digest().copy(body, 136);
  for (let i = 0; i < 3; i++)
    createHash("sha384")
      .update(`stand-in RTMR${i}`)
      .digest()
      .copy(body, 328 + 48 * i);
  rtmr3.copy(body, 472);
  reportData.copy(body, 520);
  return Buffer.concat([header, body, Buffer.alloc(4)]);
}

export async function startDstackStandIn(opts: StandInOptions = {}): Promise<DstackStandIn> {
  const appId = opts.appId ?? STAND_IN_APP_ID;
  const composeHash = opts.composeHash ?? DEFAULT_COMPOSE_HASH;
  const events = eventLogOf(appId, composeHash);
  const requests: DstackStandIn["requests"] = [];

  const answer = (path: string, body: Record<string, unknown>): unknown => {
    switch (path) {
      case "/Info":
        return {
          app_id: appId,
          instance_id: "00".repeat(20),
          app_cert: "",
          app_name: "sigil",
          device_id: "00".repeat(32),
          key_provider_info: JSON.stringify({ name: "stand-in", id: "" }),
          compose_hash: composeHash,
          tcb_info: JSON.stringify({
            mrtd: "",
            rtmr0: "",
            rtmr1: "",
            rtmr2: "",
            rtmr3: replay(events.map((e) => e.digest)).toString("hex"),
            app_compose: "",
            event_log: events,
            compose_hash: composeHash,
          }),
        };
      case "/GetKey":
        return {
          key: standInKey(appId, String(body.path ?? ""), String(body.purpose ?? "")).toString("hex"),
          signature_chain: [],
        };
      case "/GetQuote": {
        const reportData = Buffer.from(String(body.report_data ?? ""), "hex");
        if (reportData.length > 64) return { error: "report data is longer than 64 bytes" };
        const padded = Buffer.concat([reportData, Buffer.alloc(64 - reportData.length)]);
        return {
          quote: unsignedQuote(padded, replay(events.map((e) => e.digest))).toString("hex"),
          event_log: JSON.stringify(events),
          report_data: padded.toString("hex"),
          vm_config: "{}",
        };
      }
      default:
        return null;
    }
  };

  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString("utf8")));
    req.on("end", () => {
      const path = new URL(req.url ?? "/", "http://stand-in").pathname;
      let body: Record<string, unknown> = {};
      try {
        body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
      } catch {
        body = {};
      }
      requests.push({ path, body });
      const out = req.method === "POST" ? answer(path, body) : null;
      res.writeHead(out === null ? 404 : 200, { "content-type": "application/json" });
      res.end(JSON.stringify(out ?? { error: `no such RPC ${path}` }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    appId,
    composeHash,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
