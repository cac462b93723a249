/**
 * Sigil's dstack app-compose.json and its compose hash (docs/enclave.md, "Running in a TEE"): the
 * template (deploy/app-compose.template.json) with deploy/docker-compose.yml as its docker_compose_file and
 * the image pinned by digest. The file is written as deterministic JSON (keys sorted at every depth, no
 * whitespace), the form dstack's own getComposeHash hashes, so SHA-256 of the file's bytes is the compose
 * hash the CVM reports and the KMS checks against the governance's whitelist.
 */
import { createHash } from "node:crypto";

/** An image reference pinned by content: anything@sha256:<64 hex>. A tag alone can be moved. */
const PINNED_IMAGE = /^[a-z0-9][a-z0-9._\/:-]*@sha256:[0-9a-f]{64}$/;
const PLACEHOLDER = "@IMAGE@";

export class AppComposeError extends Error {
  override name = "AppComposeError";
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v !== null && typeof v === "object")
    return Object.fromEntries(
      Object.keys(v as object)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  return v;
}

export interface AppCompose {
  /** The exact bytes to deploy as app-compose.json. */
  json: string;
  /** 0x + SHA-256 of `json`. */
  composeHash: string;
}

export function buildAppCompose(templateJson: string, dockerCompose: string, image: string): AppCompose {
  if (!PINNED_IMAGE.test(image))
    throw new AppComposeError(
      `the image must be pinned by digest (name@sha256:<64 hex>), not ${JSON.stringify(image)}`,
    );
  const occurrences = dockerCompose.split(PLACEHOLDER).length - 1;
  if (occurrences !== 1)
    throw new AppComposeError(
      `deploy/docker-compose.yml must name ${PLACEHOLDER} exactly once (found ${occurrences})`,
    );
  const template = JSON.parse(templateJson) as Record<string, unknown>;
  // Where the root key comes from is measured, never left to a deploy-time variable.
  const allowed = (template.allowed_envs ?? []) as string[];
  for (const fixed of [
    "SIGIL_ROOT_KEY_PROVIDER",
    "SIGIL_DSTACK_ENDPOINT",
    "SIGIL_ROOT_KEY",
    "SIGIL_DEV_MODE",
  ])
    if (allowed.includes(fixed))
      throw new AppComposeError(
        `${fixed} must not be an allowed_env: it decides where the root key comes from`,
      );
  if (!/SIGIL_ROOT_KEY_PROVIDER:\s*dstack\b/.test(dockerCompose))
    throw new AppComposeError("deploy/docker-compose.yml must set SIGIL_ROOT_KEY_PROVIDER: dstack");
  const appCompose = { ...template, docker_compose_file: dockerCompose.replace(PLACEHOLDER, image) };
  const json = JSON.stringify(sortKeys(appCompose));
  return { json, composeHash: "0x" + createHash("sha256").update(json, "utf8").digest("hex") };
}
