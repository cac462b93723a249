/** SIGIL_WEBHOOK_ALLOW_ADDRESSES in the one-command start's configuration. */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { ConfigError, loadConfig } from "../../scripts/start/config";

describe("webhooks: SIGIL_WEBHOOK_ALLOW_ADDRESSES", () => {
  let cwd: string;
  beforeEach(() => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-config-"));
  });
  afterEach(() => fs.rmSync(cwd, { recursive: true, force: true }));

  it("is unset by default: public addresses only", () => {
    expect(loadConfig({}, cwd).webhookAllowAddresses).to.equal(undefined);
  });

  it("reads a comma-separated list of addresses and CIDR ranges", () => {
    const c = loadConfig({ SIGIL_WEBHOOK_ALLOW_ADDRESSES: "10.0.0.0/8, fd00::/8,127.0.0.1" }, cwd);
    expect(c.webhookAllowAddresses).to.deep.equal(["10.0.0.0/8", "fd00::/8", "127.0.0.1"]);
  });

  it("refuses an entry that is not an IP address or CIDR range", () => {
    let problems: string[] = [];
    try {
      loadConfig({ SIGIL_WEBHOOK_ALLOW_ADDRESSES: "hooks.internal" }, cwd);
    } catch (e) {
      expect(e).to.be.instanceOf(ConfigError);
      problems = (e as ConfigError).problems;
    }
    expect(problems).to.deep.equal([
      'SIGIL_WEBHOOK_ALLOW_ADDRESSES: "hooks.internal" is not an IP address or CIDR range (e.g. 10.0.0.0/8, ::1).',
    ]);
  });
});
