/**
 * Chooses the root-key provider the configuration names (SIGIL_ROOT_KEY_PROVIDER, docs/configuration.md).
 */
import type { RootKeySource } from "../rootKey";
import { dstackRootKeyProvider, type DstackProviderOptions } from "./dstack";
import { fileRootKeyProvider } from "./file";
import type { RootKeyProvider, RootKeyProviderName } from "./types";

export type { OpenedRootKey, RootKeyProvider, RootKeyProviderName, TeeEvidence, TeeSource } from "./types";
export { ROOT_KEY_PROVIDERS } from "./types";
export { DSTACK_ROOT_KEY_PATH, DSTACK_ROOT_KEY_PURPOSE } from "./dstack";

/** Enclave.open's options: the file provider's (unchanged) plus which provider and the dstack endpoint. */
export interface RootKeyOptions extends RootKeySource {
  /** Default "file" (today's behaviour). */
  provider?: RootKeyProviderName;
  dstack?: DstackProviderOptions;
}

export function rootKeyProvider(opts: RootKeyOptions): RootKeyProvider {
  const name = opts.provider ?? "file";
  if (name === "dstack") return dstackRootKeyProvider(opts.dstack);
  if (name === "file") return fileRootKeyProvider(opts);
  throw new TypeError(`unknown root key provider ${JSON.stringify(name)} (expected "file" or "dstack")`);
}
