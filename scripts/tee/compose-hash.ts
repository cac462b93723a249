/**
 * The compose hash and the enclave measurement of a commit, reproducibly: everything is read from the
 * commit (git show / git archive), not from the working tree, so anyone with the repository and the image
 * digest gets the same bytes (docs/enclave.md, "Running in a TEE").
 *
 *   npx ts-node --transpile-only scripts/tee/compose-hash.ts --image <name>@sha256:<digest> \
 *     [--commit <rev>] [--out app-compose.json] [--json]
 *
 * Prints the commit, the image, the compose hash (what the owner's governance approves and clients pass as
 * expectedComposeHash) and the measurement of enclave/ (the attestation document's `measurement`).
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { measureEnclave } from "../../enclave";
import { buildAppCompose } from "./appCompose";

const REPO = path.resolve(__dirname, "..", "..");

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

const git = (args: string[]) => execFileSync("git", args, { cwd: REPO, maxBuffer: 64 << 20 });

export function composeHashOfCommit(rev: string, image: string) {
  const commit = git(["rev-parse", "--verify", `${rev}^{commit}`])
    .toString()
    .trim();
  const show = (p: string) => git(["show", `${commit}:${p}`]).toString("utf8");
  const appCompose = buildAppCompose(
    show("deploy/app-compose.template.json"),
    show("deploy/docker-compose.yml"),
    image,
  );
  // The measurement covers enclave/ and package-lock.json: extract just those from the commit.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sigil-measure-"));
  try {
    const tar = git(["archive", "--format=tar", commit, "enclave", "package-lock.json"]);
    execFileSync("tar", ["-x", "-C", dir], { input: tar });
    return { commit, image, ...appCompose, measurement: measureEnclave(dir).measurement };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const image = flag("--image");
  if (!image) {
    process.stderr.write(
      "usage: compose-hash.ts --image <name>@sha256:<digest> [--commit <rev>] [--out file] [--json]\n",
    );
    process.exit(1);
  }
  try {
    const r = composeHashOfCommit(flag("--commit") ?? "HEAD", image);
    const out = flag("--out");
    if (out) fs.writeFileSync(out, r.json);
    if (process.argv.includes("--json"))
      console.log(
        JSON.stringify({
          commit: r.commit,
          image: r.image,
          compose_hash: r.composeHash,
          measurement: r.measurement,
        }),
      );
    else
      console.log(
        [
          `commit        ${r.commit}`,
          `image         ${r.image}`,
          `compose hash  ${r.composeHash}`,
          `measurement   ${r.measurement}`,
          ...(out ? [`app-compose   ${out}`] : []),
        ].join("\n"),
      );
  } catch (e) {
    process.stderr.write(`compose-hash: ${(e as Error).message}\n`);
    process.exit(1);
  }
}
