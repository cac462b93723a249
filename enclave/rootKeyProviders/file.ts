/**
 * The `file` provider: today's development default, unchanged (rootKey.ts): SIGIL_ROOT_KEY, else the
 * sealed file, generated only in dev mode. No TEE stands behind it, so attestations say tee "none".
 */
import { loadRootKey, type RootKeySource } from "../rootKey";
import type { RootKeyProvider } from "./types";

export function fileRootKeyProvider(src: RootKeySource): RootKeyProvider {
  return {
    name: "file",
    open: async () => ({ rootKey: await loadRootKey(src), tee: null }),
  };
}
