/**
 * Loads the modules an action imports, before the run is given to a worker: resolves specifiers
 * (specifier.ts), takes modules from memory or the content store (store.ts) or fetches them through
 * the address guard, checks integrity (inline `#sha384-…`, the operator's lock, else the hash recorded
 * on first use), and transforms them (transform.ts). The worker then evaluates them in the run's own
 * Compartment (worker/imports.js). Doing this in the main thread keeps one store and one cache for all
 * workers, and keeps network access for modules out of the workers.
 */
import { guardedRequest } from "../../net/guarded-request";
import { makeAddressGuard, type AddressGuard } from "../../net/address-guard";
import { ModuleError } from "./errors";
import { DEFAULT_MODULE_ORIGIN, normalizeOrigin, resolveSpecifier } from "./specifier";
import { SharedDeadline } from "./shared-deadline";
import { ModuleStore, sha384Integrity } from "./store";
import { mayImport, transformAction, transformModule } from "./transform";

export interface ModuleOptions {
  /** Where `pkg@x.y.z` resolves, and the only place modules may come from. Default jsDelivr's npm. */
  origin?: string;
  /** Non-public addresses the origin may resolve to (as fetch's allowAddresses); default none. */
  allowAddresses?: string[];
  /** Directory of the module content store; null or absent: kept in memory only. */
  storeDir?: string | null;
  /** Operator's integrity lock: URL → `sha384-<base64>` (the reference's integrity.lock). */
  lock?: Record<string, string>;
  /** Largest module, bytes; default 10 MiB (the reference's). */
  maxModuleBytes?: number;
  /** Distinct modules per run, the action's imports and theirs; default 100 (the reference's). */
  maxModules?: number;
  /** Time to load all of a run's modules that are not stored yet; default 30 s. */
  timeoutMs?: number;
}

/** What the worker needs to evaluate a run's imports (structured-clone friendly). */
export interface PreparedImports {
  /** The action's code with its import declarations rewritten (same line numbers). */
  code: string;
  /** In evaluation order (dependencies first). `deps[i]` is the index of the module its specifier i names. */
  modules: Array<{ url: string; hash: string; size: number; functionSource: string; deps: number[] }>;
  /** For each of the action's own specifiers, the index of its module. */
  actionDeps: number[];
}

interface LoadedModule {
  url: string;
  integrity: string;
  size: number;
  functionSource: string;
  specifiers: string[];
}

export const DEFAULT_MODULE_LIMITS = { maxModuleBytes: 10 * 1024 * 1024, maxModules: 100, timeoutMs: 30_000 };
/** Bytes of module text kept in memory (the reference's cache budget); the store keeps the rest. */
const MEMORY_CACHE_BYTES = 100 * 1024 * 1024;

export class ModuleLoader {
  readonly origin: string;
  readonly #guard: AddressGuard;
  readonly #store: ModuleStore;
  readonly #lock: ReadonlyMap<string, string>;
  readonly #limits: typeof DEFAULT_MODULE_LIMITS;
  /** Verified and transformed modules by URL (in flight or done); failures are not kept. */
  readonly #cache = new Map<string, Promise<LoadedModule>>();
  /** The deadline of each load in flight, shared by the runs waiting for it (the latest of theirs). */
  readonly #inFlight = new Map<string, SharedDeadline>();
  /** Sizes of the loaded entries of #cache (oldest first), and their sum. */
  readonly #cachedSizes = new Map<string, number>();
  #cachedBytes = 0;

  constructor(opts: ModuleOptions = {}) {
    this.origin = normalizeOrigin(opts.origin ?? DEFAULT_MODULE_ORIGIN);
    this.#guard = makeAddressGuard(opts.allowAddresses ?? []);
    this.#store = new ModuleStore(opts.storeDir ?? null);
    this.#lock = new Map(Object.entries(opts.lock ?? {}));
    this.#limits = {
      maxModuleBytes: opts.maxModuleBytes ?? DEFAULT_MODULE_LIMITS.maxModuleBytes,
      maxModules: opts.maxModules ?? DEFAULT_MODULE_LIMITS.maxModules,
      timeoutMs: opts.timeoutMs ?? DEFAULT_MODULE_LIMITS.timeoutMs,
    };
    for (const [k, v] of Object.entries(this.#limits))
      if (!Number.isSafeInteger(v) || v < 1) throw new TypeError(`modules.${k} must be a positive integer`);
  }

  /** Null when the code imports nothing (the common case costs one regular-expression test). */
  async prepare(code: string): Promise<PreparedImports | null> {
    if (!mayImport(code)) return null;
    const action = transformAction(code);
    if (action === null) return null;
    const deadline = Date.now() + this.#limits.timeoutMs;
    const modules: PreparedImports["modules"] = [];
    const indexByUrl = new Map<string, number>();
    const visiting = new Set<string>();
    const seen = new Set<string>();

    const visit = async (specifier: string, importer: string | null): Promise<number> => {
      const { url, integrity } = resolveSpecifier(specifier, importer, this.origin);
      const done = indexByUrl.get(url);
      if (done !== undefined) return checkExpected(modules[done].hash, integrity, url, done);
      if (visiting.has(url))
        throw new ModuleError(
          "import_invalid",
          `circular import of ${url}: cycles between modules are not supported`,
        );
      if (!seen.has(url) && seen.size >= this.#limits.maxModules)
        throw new ModuleError(
          "import_limit",
          `the action imports more than ${this.#limits.maxModules} modules`,
        );
      seen.add(url);
      visiting.add(url);
      const loaded = await withDeadline(this.#load(url, deadline), deadline, url, this.#limits.timeoutMs);
      checkExpected(loaded.integrity, integrity, url, 0);
      const deps: number[] = [];
      for (const s of loaded.specifiers) deps.push(await visit(s, url));
      visiting.delete(url);
      modules.push({
        url,
        hash: loaded.integrity,
        size: loaded.size,
        functionSource: loaded.functionSource,
        deps,
      });
      indexByUrl.set(url, modules.length - 1);
      return modules.length - 1;
    };

    const actionDeps: number[] = [];
    for (const s of action.specifiers) actionDeps.push(await visit(s, null));
    return { code: action.code, modules, actionDeps };
  }

  /**
   * One load per URL, shared by every run that needs it while it is in flight. It ends at the latest
   * deadline of those runs: a run that joins with a later deadline extends it, so the first run's
   * deadline passing does not fail the others' imports.
   */
  #load(url: string, deadline: number): Promise<LoadedModule> {
    const hit = this.#cache.get(url);
    if (hit !== undefined) {
      this.#inFlight.get(url)?.extend(deadline);
      return hit;
    }
    const shared = new SharedDeadline(deadline);
    this.#inFlight.set(url, shared);
    const loading = this.#loadUncached(url, shared.signal);
    this.#cache.set(url, loading);
    loading.then(
      (m) => this.#remember(url, m.functionSource.length),
      () => this.#cache.delete(url),
    );
    void loading
      .catch(() => undefined)
      .then(() => {
        shared.done();
        if (this.#inFlight.get(url) === shared) this.#inFlight.delete(url);
      });
    return loading;
  }

  /** Evicts the oldest modules from memory while over the budget (a run in progress keeps its copy). */
  #remember(url: string, size: number): void {
    this.#cachedSizes.set(url, size);
    this.#cachedBytes += size;
    for (const [oldest, bytes] of this.#cachedSizes) {
      if (this.#cachedBytes <= MEMORY_CACHE_BYTES || oldest === url) break;
      this.#cachedSizes.delete(oldest);
      this.#cache.delete(oldest);
      this.#cachedBytes -= bytes;
    }
  }

  async #loadUncached(url: string, signal: AbortSignal): Promise<LoadedModule> {
    let stored = await this.#store.bytes(url);
    const locked = this.#lock.get(url);
    if (stored === null) {
      const bytes = await this.#fetch(url, signal);
      const integrity = sha384Integrity(bytes);
      const recorded = await this.#store.recordedIntegrity(url);
      const expected = locked ?? recorded;
      if (expected !== undefined && expected !== null && expected !== integrity)
        throw new ModuleError(
          "import_integrity_mismatch",
          `${url}: the bytes fetched have ${integrity}, but ${locked !== undefined ? "the integrity lock says" : "the hash recorded when it was first fetched is"} ${expected}`,
        );
      stored = { url, integrity, bytes };
      await this.#store.put(stored);
    } else if (locked !== undefined && locked !== stored.integrity) {
      throw new ModuleError(
        "import_integrity_mismatch",
        `${url}: the stored module has ${stored.integrity}, but the integrity lock says ${locked}`,
      );
    }
    const source = new TextDecoder().decode(stored.bytes);
    const t = transformModule(source, url);
    return {
      url,
      integrity: stored.integrity,
      size: stored.bytes.length,
      functionSource: t.functionSource,
      specifiers: t.specifiers,
    };
  }

  /** Fetches a module; `signal` aborts it at the shared deadline of the runs waiting for it. */
  async #fetch(url: string, signal: AbortSignal): Promise<Uint8Array> {
    try {
      const res = await guardedRequest(new URL(url), {
        guard: this.#guard,
        method: "GET",
        signal,
        maxBodyBytes: this.#limits.maxModuleBytes,
      });
      if (res.status >= 300 && res.status < 400)
        throw new ModuleError(
          "import_redirect_refused",
          `${url} answered a redirect (HTTP ${res.status}); module imports never follow redirects`,
        );
      if (res.status < 200 || res.status >= 300)
        throw new ModuleError("import_fetch_failed", `${url} answered HTTP ${res.status}`);
      return res.body;
    } catch (e) {
      if (e instanceof ModuleError) throw e;
      const code = (e as { code?: string }).code;
      if (code === "address_refused")
        throw new ModuleError("import_address_refused", `${url}: ${(e as Error).message}`);
      if (code === "body_too_large")
        throw new ModuleError(
          "import_too_large",
          `${url} is over the module size limit of ${this.#limits.maxModuleBytes} bytes`,
        );
      if (signal.aborted) throw timeoutError(url, this.#limits.timeoutMs);
      throw new ModuleError("import_fetch_failed", `${url}: ${(e as Error).message}`);
    }
  }
}

function checkExpected(actual: string, expected: string | undefined, url: string, index: number): number {
  if (expected !== undefined && expected !== actual)
    throw new ModuleError(
      "import_integrity_mismatch",
      `${url}: the import asks for ${expected}, but the module has ${actual}`,
    );
  return index;
}

function timeoutError(url: string, timeoutMs: number): ModuleError {
  return new ModuleError(
    "import_timeout",
    `loading ${url} took longer than the ${timeoutMs} ms import limit`,
  );
}

/** A module being loaded for another run is shared; this run still stops waiting at its own deadline. */
function withDeadline<T>(p: Promise<T>, deadline: number, url: string, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeoutError(url, timeoutMs)), Math.max(0, deadline - Date.now()));
  });
  return Promise.race([p, expired]).finally(() => clearTimeout(timer));
}
