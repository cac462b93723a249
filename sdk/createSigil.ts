/**
 * createSigil: the client a TypeScript program uses. A thin layer over openapi-fetch and the generated
 * types (every /core/v1 operation, typed) with the transport's retries, deadlines and errors, plus:
 * paginated lists as async iterators, waitUntilExecutable, and keys that never leave the client — a
 * usage key signs its requests (signRequest.ts) and its writes (forward.ts) unless told otherwise.
 */
import createClient, { type Client } from "openapi-fetch";
import type { Wallet } from "ethers";
import { keyKind, usageKeyWallet } from "./keys";
import { paginate } from "./paginate";
import { bearerAuth, signedAuth, type Deployment } from "./signRequest";
import { ownerSessionAuth, signOutOwnerSession, type OwnerSession } from "./ownerSession";
import { createTransport, type RetryOptions } from "./transport";
import type {
  Answer,
  Body,
  ExecuteParams,
  ExecutionResult,
  PathWith,
  paths,
  Query,
  SigilConfig,
} from "./types";
import { waitUntilExecutable, type WaitOptions } from "./waitUntilExecutable";
import { forwardWrites, type ForwardWrites } from "./forward";
import { webhookOperations } from "./webhooks";
import { triggerOperations } from "./triggers";

export interface SigilOptions extends RetryOptions {
  /** Where the relayer listens, e.g. http://127.0.0.1:8080 */
  baseUrl: string;
  /** An account key (ak_…, always sent as a bearer credential) or a usage key (uk_… or 0x…). */
  apiKey?: string;
  /**
   * How a usage key proves itself: "signed" (default: the key signs each request and each write, and
   * is never sent) or "bearer" (the key itself in X-Api-Key, as curl does).
   */
  usageKeyAuth?: "signed" | "bearer";
  /**
   * Instead of a key: an owner's wallet session (signInWithEthereum in siwe.ts). Requests are signed by
   * its session key and may only read.
   */
  ownerSession?: OwnerSession;
  /** Whole-call deadline in ms, retries included (default 60 000). */
  timeoutMs?: number;
  /** A fetch to use instead of the global one (a proxy, tests). */
  fetch?: typeof globalThis.fetch;
}

type Method = "get" | "post" | "delete";
type Params<P extends keyof paths, M extends Method> = paths[P][M] extends { parameters: infer X }
  ? X
  : never;
export interface CallInit<P extends keyof paths, M extends Method> {
  params?: Params<P, M>;
  body?: Body<P, M>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export function createSigil(options: SigilOptions) {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const kind = options.apiKey === undefined ? null : keyKind(options.apiKey);
  if (options.apiKey !== undefined && kind === null)
    throw new TypeError(
      "apiKey must be an account key (ak_ + 64 hex) or a usage key (uk_ + 64 hex, or 0x + 64 hex)",
    );
  const signing = kind === "usage" && (options.usageKeyAuth ?? "signed") === "signed";
  const wallet: Wallet | null = kind === "usage" ? usageKeyWallet(options.apiKey!) : null;

  // The public facts a signature is bound to, read once (no key needed).
  const publicClient = createClient<paths>({ baseUrl, fetch: createTransport({ ...options }) });
  let config: Promise<SigilConfig> | null = null;
  const getConfig = (): Promise<SigilConfig> => {
    config ??= publicClient.GET("/core/v1/config").then((r) => r.data as SigilConfig);
    config.catch(() => (config = null)); // a failed read is retried by the next call
    return config;
  };
  const deployment = async (): Promise<Deployment> => {
    const c = await getConfig();
    return { chainId: c.chain_id, registryAddress: c.registry_address };
  };

  const auth = options.ownerSession
    ? ownerSessionAuth(options.ownerSession, deployment)
    : options.apiKey === undefined
      ? undefined
      : signing
        ? signedAuth(wallet!, deployment)
        : bearerAuth(options.apiKey);
  const transport = createTransport({ ...options, auth });
  /** Every /core/v1 operation, typed (openapi-fetch). Failures throw SigilError, so `data` is always set. */
  const api: Client<paths> = createClient<paths>({ baseUrl, fetch: transport });

  async function call<M extends Method, P extends PathWith<M>>(
    method: M,
    path: P,
    init: CallInit<P, M> = {},
  ): Promise<Answer<P, M>> {
    const fn = api[method.toUpperCase() as "GET" | "POST" | "DELETE"] as unknown as (
      p: string,
      i: unknown,
    ) => Promise<{ data?: unknown }>;
    const r = await fn(path as string, init);
    return r.data as Answer<P, M>;
  }
  const get = <P extends PathWith<"get">>(path: P, init?: CallInit<P, "get">) => call("get", path, init);
  const post = <P extends PathWith<"post">>(path: P, init?: CallInit<P, "post">) => call("post", path, init);
  const del = <P extends PathWith<"delete">>(path: P, init?: CallInit<P, "delete">) =>
    call("delete", path, init);

  /** Lists as async iterators over every item. */
  function list<
    P extends "/core/v1/pkps" | "/core/v1/groups" | "/core/v1/list_api_keys" | "/core/v1/actions/pinned",
  >(path: P) {
    return paginate(async (page_number, page_size) => {
      const query = { page_number, page_size } as Query<P, "get">;
      const page = await get(path, { params: { query } as Params<P, "get"> });
      return page as Answer<P, "get"> & { items: Answer<P, "get">["items"] };
    }) as AsyncGenerator<Answer<P, "get">["items"][number], void, undefined>;
  }

  const execute = (params: ExecuteParams, signal?: AbortSignal): Promise<ExecutionResult> =>
    post("/core/v1/svc_action", { body: params, signal });

  const writes: ForwardWrites | null = signing
    ? forwardWrites({ wallet: wallet!, api, deployment: getConfig })
    : null;

  return {
    api,
    get,
    post,
    delete: del,
    /** The usage key's address (its id on chain), when the client holds a usage key. */
    keyAddress: wallet?.address ?? null,
    /** Whether requests are signed (the key never crosses the wire). */
    signing,
    config: getConfig,

    newAccount: (body: Body<"/core/v1/new_account", "post"> = {}) => post("/core/v1/new_account", { body }),
    account: () => get("/core/v1/account"),

    addUsageKey: (body: Body<"/core/v1/add_usage_api_key", "post">) =>
      post("/core/v1/add_usage_api_key", { body }),
    usageKeys: () => list("/core/v1/list_api_keys"),
    updateUsageKey: (body: Body<"/core/v1/update_usage_api_key", "post">) =>
      post("/core/v1/update_usage_api_key", { body }),
    removeUsageKey: (body: Body<"/core/v1/remove_usage_api_key", "post">) =>
      post("/core/v1/remove_usage_api_key", { body }),
    /** A successor with the same scopes (value returned once); the old key ends after `overlap_seconds`. */
    rotateUsageApiKey: (body: Body<"/core/v1/rotate_usage_api_key", "post">) =>
      post("/core/v1/rotate_usage_api_key", { body }),
    /** The signed attestation document (check it with verifyAttestation); `nonce` is echoed in it. */
    attestation: (nonce?: string) =>
      get("/core/v1/attestation", { params: { query: nonce === undefined ? {} : { nonce } } }),

    createPkp: (body: Body<"/core/v1/pkps/create", "post"> = {}) =>
      writes ? writes.createPkp(body) : post("/core/v1/pkps/create", { body }),
    pkps: () => list("/core/v1/pkps"),
    pkp: (id: string) => get("/core/v1/pkps/{id}", { params: { path: { id } } }),

    /** The account's pinned actions ({cid, bytes, pinned_at}), newest first. */
    listPinnedActions: () => list("/core/v1/actions/pinned"),

    createGroup: (body: Body<"/core/v1/groups", "post">) =>
      writes ? writes.createGroup(body) : post("/core/v1/groups", { body }),
    groups: () => list("/core/v1/groups"),
    group: (id: number) => get("/core/v1/groups/{id}", { params: { path: { id } } }),
    deleteGroup: (id: number) =>
      writes ? writes.deleteGroup(id) : del("/core/v1/groups/{id}", { params: { path: { id } } }),
    updateGroupActions: (id: number, body: Body<"/core/v1/groups/{id}/actions", "post">) =>
      writes
        ? writes.updateGroupActions(id, body)
        : post("/core/v1/groups/{id}/actions", { params: { path: { id } }, body }),
    updateGroupPkps: (id: number, body: Body<"/core/v1/groups/{id}/pkps", "post">) =>
      writes
        ? writes.updateGroupPkps(id, body)
        : post("/core/v1/groups/{id}/pkps", { params: { path: { id } }, body }),

    /**
     * Signing policies (docs/policies.md): upload a document (answers its CID), read one, a dry run, and
     * set (`cid`) or clear (`null`) a group's policy (a signed forward request when the client signs,
     * like the other group writes).
     */
    uploadPolicy: (policy: Body<"/core/v1/policies", "post">["policy"]) =>
      post("/core/v1/policies", { body: { policy } }),
    policy: (cid: string) => get("/core/v1/policies/{cid}", { params: { path: { cid } } }),
    evaluatePolicy: (body: Body<"/core/v1/policies/evaluate", "post">) =>
      post("/core/v1/policies/evaluate", { body }),
    setGroupPolicy: (id: number, cid: string | null) =>
      writes
        ? writes.setGroupPolicy(id, cid)
        : post("/core/v1/groups/{id}/policy", { params: { path: { id } }, body: { cid } }),

    pinAction: (code: string) => post("/core/v1/actions", { body: { code } }),
    actionCid: (code: string) => post("/core/v1/actions/cid", { body: { code } }),
    action: (cid: string) => get("/core/v1/actions/{cid}", { params: { path: { cid } } }),

    /** Webhook endpoints and their delivery logs (account key; docs/webhooks.md). */
    webhooks: webhookOperations({
      get: get as (path: string, init?: unknown) => Promise<unknown>,
      post: post as (path: string, init?: unknown) => Promise<unknown>,
      delete: del as (path: string, init?: unknown) => Promise<unknown>,
    }),

    /** Triggers: schedules, inbound webhooks and chain events that run an action (account key; docs/triggers.md). */
    triggers: triggerOperations({
      get: get as (path: string, init?: unknown) => Promise<unknown>,
      post: post as (path: string, init?: unknown) => Promise<unknown>,
      delete: del as (path: string, init?: unknown) => Promise<unknown>,
    }),

    /**
     * An owner's wallet session only: ends it on the service (every instance refuses it afterwards;
     * ownerSession.ts). Forget the session afterwards as well.
     */
    signOut: () => {
      if (!options.ownerSession)
        throw new TypeError("signOut ends an owner's wallet session; this client has none");
      return signOutOwnerSession((path, init) => post(path, init));
    },

    /**
     * The account's audit log (account key or owner session; docs/audit-log.md), newest first, every
     * page followed through its cursor. Filters: from/to (ms or ISO 8601), type, usage_key, cid, pkp, outcome.
     */
    auditEntries: async function* (filter: Omit<Query<"/core/v1/audit", "get">, "cursor"> = {}) {
      let cursor: string | undefined;
      do {
        const page = await get("/core/v1/audit", {
          params: { query: { ...filter, ...(cursor ? { cursor } : {}) } },
        });
        yield* page.items;
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
    },
    /**
     * The verifiable export (JSON Lines text: header, entries, signed checkpoints) of the whole log or of
     * a time range (widened to the checkpoints around it). Check it offline with verifyAuditExport.
     */
    exportAudit: async (range: { from?: string; to?: string } = {}): Promise<string> => {
      const r = await api.GET("/core/v1/audit/export", {
        params: { query: range },
        parseAs: "text",
      });
      return r.data as string;
    },
    /** Runs an action: its `response`, `logs`, `has_error` (and `error`), `execution_ms`, `charged_cents`. */
    execute,
    /** Executes until the service accepts (right after a permission change); see waitUntilExecutable.ts. */
    waitUntilExecutable: (params: ExecuteParams, opts?: WaitOptions) =>
      waitUntilExecutable(execute, params, opts),
  };
}

export type Sigil = ReturnType<typeof createSigil>;
