/**
 * Sigil's dstack app-compose and its compose hash (scripts/tee/): the hash is dstack's own (the SDK's
 * getComposeHash agrees), the same for the same commit and image, and the root key's source is measured.
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "chai";
import { getComposeHash } from "@phala/dstack-sdk";
import { measureEnclave } from "../../enclave";
import { AppComposeError, buildAppCompose } from "../../scripts/tee/appCompose";
import { composeHashOfCommit } from "../../scripts/tee/compose-hash";

const ROOT = path.resolve(__dirname, "..", "..");
const TEMPLATE = fs.readFileSync(path.join(ROOT, "deploy", "app-compose.template.json"), "utf8");
const COMPOSE = fs.readFileSync(path.join(ROOT, "deploy", "docker-compose.yml"), "utf8");
const IMAGE = "ghcr.io/example/sigil@sha256:" + "ab".repeat(32);

describe("attestation: the dstack app-compose and its compose hash", function () {
  this.timeout(60_000);

  it("hashes the deployed bytes the way dstack does (the SDK's getComposeHash agrees)", () => {
    const { json, composeHash } = buildAppCompose(TEMPLATE, COMPOSE, IMAGE);
    expect(composeHash).to.equal("0x" + getComposeHash(JSON.parse(json)));
  });

  it("pins the image by digest in the measured compose file", () => {
    const { json } = buildAppCompose(TEMPLATE, COMPOSE, IMAGE);
    expect(JSON.parse(json).docker_compose_file).to.include(`image: "${IMAGE}"`);
  });

  it("refuses an image named by tag only", () => {
    expect(() => buildAppCompose(TEMPLATE, COMPOSE, "ghcr.io/example/sigil:latest")).to.throw(
      AppComposeError,
      /pinned by digest/,
    );
  });

  it("measures the root key's source: dstack fixed in the compose file, never a deploy-time variable", () => {
    expect(COMPOSE).to.match(/SIGIL_ROOT_KEY_PROVIDER: dstack/);
    const withProvider = JSON.stringify({
      ...JSON.parse(TEMPLATE),
      allowed_envs: ["SIGIL_ROOT_KEY_PROVIDER"],
    });
    expect(() => buildAppCompose(withProvider, COMPOSE, IMAGE)).to.throw(AppComposeError, /allowed_env/);
  });

  it("computes the same compose hash and measurement from a commit every time", () => {
    const a = composeHashOfCommit("HEAD", IMAGE);
    const b = composeHashOfCommit("HEAD", IMAGE);
    expect(a.composeHash).to.equal(b.composeHash);
    expect(a.json).to.equal(b.json);
    expect(a.measurement).to.match(/^0x[0-9a-f]{64}$/);
    expect(a.measurement).to.equal(b.measurement);
  });

  it("the measurement of a commit is the one the service computes from a checkout of it", function () {
    const head = composeHashOfCommit("HEAD", IMAGE);
    // Only comparable when enclave/ and the lockfile are as committed.
    const dirty = execFileSync("git", ["status", "--porcelain", "--", "enclave", "package-lock.json"], {
      cwd: ROOT,
    }).toString();
    if (dirty.trim() !== "") {
      console.log("    (skipped: enclave/ or package-lock.json has uncommitted changes)");
      this.skip();
    }
    expect(head.measurement).to.equal(measureEnclave(ROOT).measurement);
  });
});
