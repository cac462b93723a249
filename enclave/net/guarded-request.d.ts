/** Types of guarded-request.js (plain CommonJS so that worker threads can load it without ts-node). */
import type { LookupFunction } from "node:net";
import type { AddressGuard } from "./address-guard";

export interface GuardedResponse {
  status: number;
  statusText: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

export function guardedRequest(
  url: URL,
  opts: {
    guard: AddressGuard;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Uint8Array;
    signal?: AbortSignal;
    maxBodyBytes: number;
  },
): Promise<GuardedResponse>;

export function guardedLookup(
  guard: AddressGuard,
  resolve?: (
    hostname: string,
    options: { all: true; verbatim: true },
    callback: (
      err: NodeJS.ErrnoException | null,
      addresses: Array<{ address: string; family: number }>,
    ) => void,
  ) => void,
): LookupFunction;

export class AddressRefusedError extends Error {
  readonly code: "address_refused";
}
export class BodyTooLargeError extends Error {
  readonly code: "body_too_large";
}
