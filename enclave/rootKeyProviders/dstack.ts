/**
 * The `dstack` provider: the root key comes from dstack's KMS through its guest agent (the official
 * @phala/dstack-sdk), so it exists only in this CVM's memory and nothing key-shaped is written to disk.
 * The KMS derives the key from the app's identity (its app id, whose allowed compose hashes the owner's
 * governance controls) and the path below: the same app gets the same key after a restart or an approved
 * upgrade, and another app (another identity) gets another key. docs/enclave.md, "Running in a TEE".
 */
import { DstackClient } from "@phala/dstack-sdk";
import { EnclaveError } from "../errors";
import { decodeRootKey } from "../rootKey";
import type { RootKeyProvider, TeeEvidence } from "./types";

/**
 * The KMS path of the root key. Versioned and never reused: changing it changes every key of every user,
 * so a new scheme gets a new path (…/v2) and a migration, never an edit of this one.
 */
export const DSTACK_ROOT_KEY_PATH = "sigil/root-key/v1";
/** getKey's `purpose`: part of the KMS derivation, so no other use of the same path collides with it. */
export const DSTACK_ROOT_KEY_PURPOSE = "sigil-root-key";

export interface DstackProviderOptions {
  /**
   * The guest agent: a Unix socket path or an http(s) URL. Absent: the SDK's own discovery
   * (DSTACK_SIMULATOR_ENDPOINT, else /var/run/dstack.sock and its siblings).
   */
  endpoint?: string;
}

const hex0x = (h: string) => "0x" + h.replace(/^0x/i, "").toLowerCase();

/** A failure talking to the guest agent, with only the agent's own message (it never carries a key). */
function unavailable(what: string, endpoint: string | undefined, e: unknown): EnclaveError {
  return new EnclaveError("root_key_unavailable", "The dstack guest agent did not give the root key.", {
    details: `${what} at ${endpoint ?? "the SDK's default endpoint"}: ${(e as Error)?.message ?? String(e)}`,
    cause: e,
  });
}

export function dstackRootKeyProvider(opts: DstackProviderOptions = {}): RootKeyProvider {
  return {
    name: "dstack",
    open: async () => {
      let client: DstackClient;
      try {
        client = new DstackClient(opts.endpoint);
      } catch (e) {
        throw unavailable("connecting", opts.endpoint, e);
      }
      let info: Awaited<ReturnType<DstackClient["info"]>>;
      let key: Uint8Array;
      try {
        info = await client.info();
        ({ key } = await client.getKey(DSTACK_ROOT_KEY_PATH, DSTACK_ROOT_KEY_PURPOSE));
      } catch (e) {
        throw unavailable("asking for the app's key", opts.endpoint, e);
      }
      let rootKey: Uint8Array;
      try {
        rootKey = decodeRootKey(key, "dstack getKey");
      } finally {
        key.fill(0); // decodeRootKey copied it; leave no second copy behind.
      }
      if (typeof info.compose_hash !== "string" || !/^(0x)?[0-9a-fA-F]{64}$/.test(info.compose_hash))
        throw unavailable("reading the app's info", opts.endpoint, new Error("no compose hash"));
      return {
        rootKey,
        tee: {
          tee: "tdx",
          composeHash: hex0x(info.compose_hash),
          appId: hex0x(String(info.app_id ?? "")),
          quote: async (reportData: Uint8Array): Promise<TeeEvidence> => {
            try {
              const q = await client.getQuote(reportData);
              return { quote: hex0x(q.quote), eventLog: q.event_log };
            } catch (e) {
              throw new EnclaveError("tee_quote_failed", "The TEE did not produce a quote.", {
                details: (e as Error)?.message ?? String(e),
                cause: e,
              });
            }
          },
        },
      };
    },
  };
}
