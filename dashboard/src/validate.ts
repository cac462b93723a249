/** Checks made in the page before anything is sent: the API checks again, these give the inline error. */

/** An IPFS CID as actions use them: CIDv0 (Qm… base58btc) or CIDv1 base32 (b…). */
export function isCid(s: string): boolean {
  return /^Qm[1-9A-HJ-NP-Za-km-z]{44}$/.test(s) || /^b[a-z2-7]{50,}$/.test(s);
}

export function isAddress(s: string): boolean {
  return /^0x[0-9a-fA-F]{40}$/.test(s);
}

/** Parses a JSON text for action params; `null` text means no params. */
export function parseJson(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (text.trim() === "") return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: `Not valid JSON: ${(e as Error).message}` };
  }
}
