/** Types of address-guard.js (plain CommonJS so that worker threads can load it without ts-node). */
export type AddressCategory =
  "public" | "loopback" | "private" | "link-local" | "metadata" | "multicast" | "reserved" | "unspecified";

export interface AddressGuard {
  /** Public, or allowed by the operator. */
  permits(address: string): boolean;
  /** The category of the address (why it was refused when it was). */
  reason(address: string): AddressCategory;
}

export function classifyAddress(address: string): AddressCategory;
export function makeAddressGuard(allowed?: readonly string[]): AddressGuard;
export function parseAllowList(entries: readonly string[]): import("node:net").BlockList;
export function embeddedIPv4(address: string): string | null;
