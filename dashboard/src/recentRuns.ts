/**
 * This tab's recent runs. A run keeps going when its page is left (the answer, and the charge, would
 * otherwise be lost): runs live in this module, not in the page's state, and finished ones are kept in
 * sessionStorage (this tab only, gone with it or at sign-out). Never a key: only what the run was and
 * what it answered.
 */
import { useSyncExternalStore } from "react";
import type { ShownError } from "./api";

export interface RunRecord {
  id: number;
  startedAt: number;
  /** "the code in the editor" (its CID once known) or the CID run. */
  what: string;
  pkpName: string;
  timeoutMs: number;
  status: "running" | "succeeded" | "failed" | "refused";
  result?: {
    response: unknown;
    logs: string;
    has_error: boolean;
    error?: { code: string; message: string };
    cid?: string;
    execution_ms: number;
    charged_cents: number;
  };
  /** The API's refusal (the run did not start). */
  error?: ShownError;
}

export const RUNS_SLOT = "sigil.session.runs";
const KEEP = 10;

let runs: RunRecord[] = load();
const listeners = new Set<() => void>();

function load(): RunRecord[] {
  try {
    const raw = sessionStorage.getItem(RUNS_SLOT);
    return raw ? (JSON.parse(raw) as RunRecord[]) : [];
  } catch {
    return [];
  }
}

function save(): void {
  const finished = runs.filter((r) => r.status !== "running");
  try {
    sessionStorage.setItem(RUNS_SLOT, JSON.stringify(finished));
  } catch {
    // full or unavailable: the list lives on in memory
  }
  for (const l of listeners) l();
}

function update(id: number, change: Partial<RunRecord>): void {
  runs = runs.map((r) => (r.id === id ? { ...r, ...change } : r));
  save();
}

/** Starts a run; it completes whether or not the page that started it is still shown. */
export function startRun(
  meta: Pick<RunRecord, "what" | "pkpName" | "timeoutMs">,
  work: () => Promise<NonNullable<RunRecord["result"]>>,
  describe: (e: unknown) => ShownError,
): RunRecord {
  const rec: RunRecord = {
    ...meta,
    id: Date.now() + Math.random(),
    startedAt: Date.now(),
    status: "running",
  };
  runs = [rec, ...runs].slice(0, KEEP);
  save();
  work().then(
    (result) => update(rec.id, { status: result.has_error ? "failed" : "succeeded", result }),
    (e: unknown) => update(rec.id, { status: "refused", error: describe(e) }),
  );
  return rec;
}

/** Forgets every run (sign-out). */
export function forgetRuns(): void {
  runs = [];
  sessionStorage.removeItem(RUNS_SLOT);
  for (const l of listeners) l();
}

function subscribe(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

export function useRecentRuns(): RunRecord[] {
  return useSyncExternalStore(subscribe, () => runs);
}
