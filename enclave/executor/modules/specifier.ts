/**
 * Import specifiers of actions and their modules, resolved to URLs under the operator's module origin
 * (docs/actions.md, "ES module imports"). Pinned versions only: a URL whose content may change (a
 * range, a tag, a bare name) would make integrity and trust-on-first-use meaningless.
 */
import { ModuleError } from "./errors";

/** The reference runtime's CDN: npm packages served unchanged, at immutable version-pinned URLs. */
export const DEFAULT_MODULE_ORIGIN = "https://cdn.jsdelivr.net/npm/";

export interface ResolvedSpecifier {
  /** Without the fragment: the URL fetched, and the key of the content store. */
  url: string;
  /** `sha384-<base64>` from a `#sha384-…` fragment of the specifier, if any. */
  integrity?: string;
}

const EXACT_VERSION = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;
const PACKAGE_NAME = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;
const INTEGRITY = /^sha384-[A-Za-z0-9+/]{64}$/;

/** Checks an origin given by the operator; returns it with a trailing slash. */
export function normalizeOrigin(origin: string): string {
  let u: URL;
  try {
    u = new URL(origin);
  } catch {
    throw new TypeError(`modules.origin: ${JSON.stringify(origin)} is not a URL`);
  }
  if ((u.protocol !== "https:" && u.protocol !== "http:") || u.username || u.password || u.search || u.hash)
    throw new TypeError(
      `modules.origin: ${JSON.stringify(origin)} must be an http(s) URL without credentials, query or fragment`,
    );
  return u.href.endsWith("/") ? u.href : u.href + "/";
}

/**
 * Resolves `specifier` as written in an action (`importer` null) or in a module (`importer` its URL).
 * Accepted: `pkg@1.2.3`, `@scope/pkg@1.2.3`, `pkg@1.2.3/file.js` (no file: `/+esm`, the ESM entry), a
 * full URL under the origin, and inside modules a path (`/npm/…`, `./x.js`) that resolves under it.
 */
export function resolveSpecifier(
  specifier: string,
  importer: string | null,
  origin: string,
): ResolvedSpecifier {
  const hashAt = specifier.indexOf("#");
  const spec = hashAt < 0 ? specifier : specifier.slice(0, hashAt);
  const fragment = hashAt < 0 ? undefined : specifier.slice(hashAt + 1);
  if (fragment !== undefined && !INTEGRITY.test(fragment))
    throw new ModuleError(
      "import_invalid",
      `import "${specifier}": the fragment must be an integrity hash, #sha384-<64 base64 characters>`,
    );
  let url: URL;
  if (/^[a-z][a-z0-9+.-]*:/i.test(spec)) {
    url = parseUrl(spec, specifier);
  } else if (spec.startsWith("/") || spec.startsWith("./") || spec.startsWith("../")) {
    if (importer === null)
      throw new ModuleError(
        "import_invalid",
        `import "${specifier}": an action imports packages as pkg@x.y.z or by full URL, not by path`,
      );
    url = parseUrl(spec, specifier, importer);
  } else {
    url = parseUrl(origin + npmPath(spec, specifier), specifier);
  }
  url.hash = "";
  // Checked after URL normalization, so that `pkg@1.0.0/../../other` cannot leave the origin.
  if (!url.href.startsWith(origin))
    throw new ModuleError(
      "import_invalid",
      `import "${specifier}": only modules under the module origin ${origin} may be imported`,
    );
  if (url.search)
    throw new ModuleError("import_invalid", `import "${specifier}": a module URL has no query string`);
  checkPinned(url.href.slice(origin.length), specifier);
  return fragment === undefined ? { url: url.href } : { url: url.href, integrity: fragment };
}

function parseUrl(text: string, specifier: string, base?: string): URL {
  let url: URL;
  try {
    url = new URL(text, base);
  } catch {
    throw new ModuleError("import_invalid", `import "${specifier}": not a valid specifier or URL`);
  }
  if (url.username || url.password)
    throw new ModuleError("import_invalid", `import "${specifier}": a module URL carries no credentials`);
  return url;
}

/** `pkg@1.2.3` → `pkg@1.2.3/+esm`; `pkg@1.2.3/file.js` unchanged. */
function npmPath(spec: string, specifier: string): string {
  const { version, rest } = splitPackage(spec, specifier);
  return rest === "" ? `${spec}/+esm` : (checkVersionText(version, specifier), spec);
}

/** The path under the origin must start with `name@exact.version`. */
function checkPinned(pathUnderOrigin: string, specifier: string): void {
  let path: string;
  try {
    path = decodeURIComponent(pathUnderOrigin);
  } catch {
    throw new ModuleError("import_invalid", `import "${specifier}": malformed percent-encoding`);
  }
  const { version } = splitPackage(path, specifier);
  checkVersionText(version, specifier);
}

function splitPackage(spec: string, specifier: string): { name: string; version: string; rest: string } {
  const scoped = spec.startsWith("@");
  const nameEnd = scoped ? spec.indexOf("/") : -1;
  const at = spec.indexOf("@", scoped ? nameEnd + 1 : 0);
  const slashAfterName = spec.indexOf("/", scoped ? nameEnd + 1 : 0);
  if (at < 0 || (slashAfterName >= 0 && slashAfterName < at)) {
    const name = slashAfterName >= 0 ? spec.slice(0, slashAfterName) : spec;
    throw new ModuleError(
      "import_not_pinned",
      `import "${specifier}": a version is required; write ${name}@x.y.z (an exact version)`,
    );
  }
  const name = spec.slice(0, at);
  if (!PACKAGE_NAME.test(name))
    throw new ModuleError("import_invalid", `import "${specifier}": "${name}" is not an npm package name`);
  const slash = spec.indexOf("/", at);
  const version = slash < 0 ? spec.slice(at + 1) : spec.slice(at + 1, slash);
  checkVersionText(version, specifier);
  return { name, version, rest: slash < 0 ? "" : spec.slice(slash) };
}

function checkVersionText(version: string, specifier: string): void {
  if (!EXACT_VERSION.test(version))
    throw new ModuleError(
      "import_not_pinned",
      `import "${specifier}": "${version}" is not an exact version; pin one such as 1.2.3 (ranges and tags are refused)`,
    );
}
