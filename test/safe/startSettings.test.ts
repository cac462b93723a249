/** The Safe tool reads npm start's configuration for its defaults (scripts/safe/lib/startSettings.ts). */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect } from "chai";
import { startSettings } from "../../scripts/safe/lib/startSettings";

describe("Safe tool: defaults from npm start's configuration", () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-safe-settings-"));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("with nothing set: the embedded chain's default port and .sigil", () => {
    expect(startSettings({}, dir)).to.deep.equal({
      rpcUrl: "http://127.0.0.1:8545",
      dataDir: path.join(dir, ".sigil"),
    });
  });
  it("SIGIL_ANVIL_PORT and SIGIL_DATA_DIR from the environment", () => {
    expect(startSettings({ SIGIL_ANVIL_PORT: "8546", SIGIL_DATA_DIR: "other" }, dir)).to.deep.equal({
      rpcUrl: "http://127.0.0.1:8546",
      dataDir: path.join(dir, "other"),
    });
  });
  it("the same settings from sigil.config.json; the environment wins over the file", () => {
    fs.writeFileSync(
      path.join(dir, "sigil.config.json"),
      JSON.stringify({ SIGIL_ANVIL_PORT: 9545, SIGIL_DATA_DIR: "from-file" }),
    );
    expect(startSettings({}, dir).rpcUrl).to.equal("http://127.0.0.1:9545");
    expect(startSettings({ SIGIL_DATA_DIR: "from-env" }, dir).dataDir).to.equal(path.join(dir, "from-env"));
  });
  it("SIGIL_RPC_URL (an external chain) wins over the embedded chain's port", () => {
    expect(
      startSettings({ SIGIL_RPC_URL: "http://chain:8545", SIGIL_ANVIL_PORT: "8546" }, dir).rpcUrl,
    ).to.equal("http://chain:8545");
  });
});
