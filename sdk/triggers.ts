/**
 * Triggers in the SDK (docs/triggers.md): typed helpers for the /core/v1/triggers operations (account
 * key). `sigil.triggers.create({...})` makes a schedule, webhook or chain-event trigger that runs an
 * action as one of the account's usage keys; `runs(id)` iterates its run history, newest first.
 */
import { paginate, type Page } from "./paginate";
import type { Answer, Body } from "./types";

export type Trigger = Answer<"/core/v1/triggers/{id}", "get">;
export type NewTrigger = Body<"/core/v1/triggers", "post">;
export type TriggerUpdate = Body<"/core/v1/triggers/{id}", "post">;
export type TriggerRun = Answer<"/core/v1/triggers/{id}/runs/{run_id}", "get">;
export type TriggerRunStatus = TriggerRun["status"];

/** The operations, given the client's calls (createSigil wires them as `sigil.triggers`). */
export function triggerOperations(call: {
  get: (path: string, init?: unknown) => Promise<unknown>;
  post: (path: string, init?: unknown) => Promise<unknown>;
  delete: (path: string, init?: unknown) => Promise<unknown>;
}) {
  const params = (id: string) => ({ path: { id } });
  return {
    /** Creates a trigger; a webhook trigger with an HMAC answers its `webhook_secret` this once. */
    create: (body: NewTrigger) => call.post("/core/v1/triggers", { body }) as Promise<Trigger>,
    /** Every trigger of the account, as an async iterator. */
    list: () =>
      paginate(
        (page_number, page_size) =>
          call.get("/core/v1/triggers", { params: { query: { page_number, page_size } } }) as Promise<
            Page<Trigger>
          >,
      ),
    get: (id: string) => call.get("/core/v1/triggers/{id}", { params: params(id) }) as Promise<Trigger>,
    /** Changes the fields given; the others keep their value (the kind never changes). */
    update: (id: string, body: TriggerUpdate) =>
      call.post("/core/v1/triggers/{id}", { params: params(id), body }) as Promise<Trigger>,
    enable: (id: string) =>
      call.post("/core/v1/triggers/{id}/enable", { params: params(id), body: {} }) as Promise<Trigger>,
    disable: (id: string) =>
      call.post("/core/v1/triggers/{id}/disable", { params: params(id), body: {} }) as Promise<Trigger>,
    remove: (id: string) =>
      call.delete("/core/v1/triggers/{id}", { params: params(id) }) as Promise<{ deleted: boolean }>,
    /** Fires the trigger now (a manual firing); the run is queued: follow it with `run`. */
    fire: (id: string) =>
      call.post("/core/v1/triggers/{id}/fire", { params: params(id), body: {} }) as Promise<{
        run_id: string;
        firing_id: string;
      }>,
    /** The trigger's runs, newest first, as an async iterator (optionally of one status). */
    runs: (id: string, status?: TriggerRunStatus) =>
      paginate(
        (page_number, page_size) =>
          call.get("/core/v1/triggers/{id}/runs", {
            params: { path: { id }, query: { page_number, page_size, ...(status ? { status } : {}) } },
          }) as Promise<Page<TriggerRun>>,
      ),
    run: (id: string, runId: string) =>
      call.get("/core/v1/triggers/{id}/runs/{run_id}", {
        params: { path: { id, run_id: runId } },
      }) as Promise<TriggerRun>,
  };
}
