import { expect } from "chai";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Enclave } from "../../enclave";
import { expectEnclaveError, expectEnclaveRejection } from "./helpers";

const ROOT_HEX = "0x" + "3c".repeat(32);
const PKP = "0x" + "00".repeat(31) + "09";

describe("enclave root key", function () {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(path.join(tmpdir(), "sigil-root-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const reference = Enclave.fromRootKey(ROOT_HEX);

  it("opens from a hex string (the SIGIL_ROOT_KEY path) and derives the same keys as fromRootKey", async function () {
    const e = await Enclave.open({ rootKeyHex: ROOT_HEX });
    expect(e.pkpAddress(PKP)).to.equal(reference.pkpAddress(PKP));
  });

  it("accepts the hex without 0x and with a trailing newline", async function () {
    const e = await Enclave.open({ rootKeyHex: ROOT_HEX.slice(2) + "\n" });
    expect(e.pkpAddress(PKP)).to.equal(reference.pkpAddress(PKP));
  });

  it("fromRootKey accepts 32 bytes", function () {
    expect(Enclave.fromRootKey(new Uint8Array(32).fill(0x3c)).pkpAddress(PKP)).to.equal(
      reference.pkpAddress(PKP),
    );
  });

  it("opens from a sealed file", async function () {
    const file = path.join(dir, "root.key");
    writeFileSync(file, ROOT_HEX + "\n", { mode: 0o600 });
    const e = await Enclave.open({ rootKeyFile: file });
    expect(e.pkpAddress(PKP)).to.equal(reference.pkpAddress(PKP));
  });

  it("prefers the injected hex over the file", async function () {
    const file = path.join(dir, "root.key");
    writeFileSync(file, "0x" + "01".repeat(32), { mode: 0o600 });
    const e = await Enclave.open({ rootKeyHex: ROOT_HEX, rootKeyFile: file });
    expect(e.pkpAddress(PKP)).to.equal(reference.pkpAddress(PKP));
  });

  it("warns when the file is readable by group or others", async function () {
    const file = path.join(dir, "root.key");
    writeFileSync(file, ROOT_HEX);
    chmodSync(file, 0o644);
    const warnings: string[] = [];
    await Enclave.open({ rootKeyFile: file, warn: (m) => warnings.push(m) });
    expect(warnings.join("\n")).to.match(/group\/others/);
  });

  it("dev mode generates the file with mode 0600 on first start and warns", async function () {
    const file = path.join(dir, "nested", "root.key");
    const warnings: string[] = [];
    const e = await Enclave.open({ rootKeyFile: file, devMode: true, warn: (m) => warnings.push(m) });
    expect(statSync(file).mode & 0o777).to.equal(0o600);
    expect(readFileSync(file, "utf8")).to.match(/^[0-9a-f]{64}\n$/);
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.match(/DEV MODE/);
    expect(warnings[0]).to.not.include(readFileSync(file, "utf8").trim());
    expect(e.gasAddress(0)).to.match(/^0x[0-9a-fA-F]{40}$/);
  });

  it("dev mode reuses the generated key on the next start, without a warning", async function () {
    const file = path.join(dir, "root.key");
    const first = await Enclave.open({ rootKeyFile: file, devMode: true, warn: () => undefined });
    const warnings: string[] = [];
    const second = await Enclave.open({ rootKeyFile: file, devMode: true, warn: (m) => warnings.push(m) });
    expect(second.pkpAddress(PKP)).to.equal(first.pkpAddress(PKP));
    expect(warnings).to.deep.equal([]);
  });

  it("without dev mode a missing file is root_key_missing and nothing is created", async function () {
    const file = path.join(dir, "root.key");
    await expectEnclaveRejection(Enclave.open({ rootKeyFile: file }), "root_key_missing");
    expect(existsSync(file)).to.equal(false);
  });

  it("no source at all is root_key_missing", async function () {
    await expectEnclaveRejection(Enclave.open({}), "root_key_missing");
  });

  for (const [name, bad] of [
    ["too short", "0x1234"],
    ["non-hex", "0x" + "zz".repeat(32)],
    ["all zero", "0x" + "00".repeat(32)],
    ["33 bytes", "0x" + "11".repeat(33)],
  ] as const) {
    it(`a ${name} key is root_key_invalid`, async function () {
      await expectEnclaveRejection(Enclave.open({ rootKeyHex: bad }), "root_key_invalid");
      expectEnclaveError(() => Enclave.fromRootKey(bad), "root_key_invalid");
    });
  }

  it("a file with garbage is root_key_invalid", async function () {
    const file = path.join(dir, "root.key");
    writeFileSync(file, "not a key", { mode: 0o600 });
    await expectEnclaveRejection(Enclave.open({ rootKeyFile: file }), "root_key_invalid");
  });

  it("fromRootKey refuses 31 bytes and non-key types", function () {
    expectEnclaveError(() => Enclave.fromRootKey(new Uint8Array(31).fill(1)), "root_key_invalid");
    expectEnclaveError(() => Enclave.fromRootKey(42 as never), "root_key_invalid");
  });

  it("the enclave copies the root key: zeroing the caller's buffer changes nothing", function () {
    const bytes = new Uint8Array(32).fill(0x3c);
    const e = Enclave.fromRootKey(bytes);
    bytes.fill(0);
    expect(e.pkpAddress(PKP)).to.equal(reference.pkpAddress(PKP));
  });
});
