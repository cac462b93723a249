/**
 * Enclave.signForwardRequestAsOwnerOf: the operator-only capability of the registry migration command
 * (signing as an API-mode account's service-managed owner from its master-key address alone).
 */
import { expect } from "chai";
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { ethers } from "ethers";
import { Enclave, FORWARD_REQUEST_TYPES } from "../../enclave";
import { expectEnclaveRejection } from "./helpers";

const ROOT = path.resolve(__dirname, "..", "..");
const DOMAIN = {
  name: "SigilForwarder",
  version: "1",
  chainId: 31337n,
  verifyingContract: "0x" + "ab".repeat(20),
};
const REQUEST = { to: "0x" + "cd".repeat(20), data: "0x1234", gas: 100_000n, nonce: 7n, deadline: 2 ** 40 };

/** Files under `folder` (tracked or not) whose text names `word`. */
function filesNaming(word: string, folder: string): string[] {
  try {
    return execFileSync("grep", ["-rl", "--include=*.ts", word, folder], { cwd: ROOT, encoding: "utf8" })
      .trim()
      .split("\n")
      .filter(Boolean)
      .sort();
  } catch {
    return []; // grep exits 1 when nothing matches
  }
}

describe("enclave: signing as an API-mode owner for the migration (signForwardRequestAsOwnerOf)", function () {
  const enclave = Enclave.fromRootKey("0x" + "6b".repeat(32));
  const account = enclave.generateAccountKey();

  it("signs as ownerAddress(masterKey), recoverable with ethers' EIP-712", async function () {
    const signed = await enclave.signForwardRequestAsOwnerOf(account.address, REQUEST, DOMAIN);
    const owner = enclave.ownerAddress(account.address);
    const recovered = ethers.verifyTypedData(
      DOMAIN,
      FORWARD_REQUEST_TYPES,
      { ...REQUEST, from: owner, value: 0n },
      signed.signature,
    );
    expect([signed.from, recovered]).to.deep.equal([owner, owner]);
  });

  it("gives the same signature the account key gives (what the relayer sends for that account)", async function () {
    const asOwner = await enclave.signForwardRequestAsOwnerOf(account.address, REQUEST, DOMAIN);
    expect(asOwner).to.deep.equal(await enclave.signForwardRequest(account.apiKey, REQUEST, DOMAIN));
  });

  it("refuses a master key that is not an address", async function () {
    await expectEnclaveRejection(
      enclave.signForwardRequestAsOwnerOf("0x1234", REQUEST, DOMAIN),
      "invalid_address",
    );
  });

  it("is never reachable from the relayer (no file under relayer/ names it)", function () {
    expect(filesNaming("signForwardRequestAsOwnerOf", "relayer")).to.deep.equal([]);
  });

  it("is called outside enclave/ by the migration command only", function () {
    const callers = ["relayer", "scripts", "cli", "sdk", "dashboard", "bench"].flatMap((f) =>
      filesNaming("signForwardRequestAsOwnerOf", f),
    );
    expect(callers).to.deep.equal(["scripts/migrate/command.ts"]);
  });
});
