/**
 * One in-flight module fetch per URL is shared by the runs that import it; it ends at the latest
 * deadline of the runs waiting for it, never at the first one's (docs/actions.md, "ES module imports").
 * A real HTTP origin on loopback (allowed in this configuration only) answers after a delay.
 */
import { expect } from "chai";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { ModuleLoader } from "../../enclave/executor/modules/loader";
import { ModuleError } from "../../enclave/executor/modules/errors";

const TIMEOUT_MS = 600;
const ANSWER_AFTER_MS = 900;

describe("executor: a module fetch shared by runs", function () {
  this.timeout(20_000);
  let server: http.Server;
  let origin: string;
  let requests = 0;

  before(async function () {
    server = http.createServer((req, res) => {
      requests++;
      setTimeout(() => {
        res.writeHead(200, { "content-type": "application/javascript" }).end("export const x = 7;");
      }, ANSWER_AFTER_MS);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}/npm/`;
  });

  after(async function () {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it("still gives the module to a later run when the first run's deadline passes", async function () {
    const loader = new ModuleLoader({ origin, allowAddresses: ["127.0.0.1"], timeoutMs: TIMEOUT_MS });
    const code = `import { x } from "slow@1.0.0"; return x;`;
    // The first run's deadline is at 600 ms, the second's at 1000 ms; the answer comes at 900 ms.
    const first = loader.prepare(code).then(
      () => null,
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 400));
    const second = await loader.prepare(code);
    const firstError = await first;
    expect(firstError).to.be.instanceOf(ModuleError);
    expect((firstError as ModuleError).code).to.equal("import_timeout");
    expect(second?.modules.map((m) => m.url)).to.deep.equal([`${origin}slow@1.0.0/+esm`]);
    expect(requests).to.equal(1);
  });
});
