/**
 * The `file` provider's loading of the root key (rootKeyProviders/file.ts; in a TEE the `dstack` provider
 * takes it from dstack's KMS instead): from an injected hex string (the SIGIL_ROOT_KEY environment
 * variable read by the caller), else from a sealed file; generated into that
 * file (mode 0600, with a warning) only in an explicit dev mode. The key is 32 bytes, written as 64 hex
 * characters (an optional 0x and surrounding whitespace, e.g. a trailing newline, are tolerated).
 * Errors describe what is wrong and never include any of the input.
 */
import { promises as fs } from "node:fs";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { EnclaveError } from "./errors";

export interface RootKeySource {
  rootKeyFile?: string;
  rootKeyHex?: string;
  devMode?: boolean;
  warn?: (msg: string) => void;
}

export function decodeRootKey(input: unknown, origin: string): Uint8Array {
  let bytes: Uint8Array | null = null;
  if (input instanceof Uint8Array) {
    bytes = input.length === 32 ? Uint8Array.from(input) : null;
  } else if (typeof input === "string") {
    const t = input.trim();
    const h = t.startsWith("0x") || t.startsWith("0X") ? t.slice(2) : t;
    bytes = /^[0-9a-fA-F]{64}$/.test(h) ? Uint8Array.from(Buffer.from(h, "hex")) : null;
  }
  if (!bytes) {
    throw new EnclaveError("root_key_invalid", "Invalid root key.", {
      details: `${origin}: expected 32 bytes as 64 hex characters`,
    });
  }
  if (bytes.every((b) => b === 0)) {
    throw new EnclaveError("root_key_invalid", "Invalid root key.", {
      details: `${origin}: the all-zero key is refused`,
    });
  }
  return bytes;
}

export async function loadRootKey(src: RootKeySource): Promise<Uint8Array> {
  const warn = src.warn ?? ((m: string) => console.warn(m));
  if (src.rootKeyHex !== undefined && src.rootKeyHex !== "")
    return decodeRootKey(src.rootKeyHex, "rootKeyHex");
  if (!src.rootKeyFile) {
    throw new EnclaveError("root_key_missing", "No root key configured.", {
      details: "set SIGIL_ROOT_KEY or a root key file (dev mode generates one)",
    });
  }
  const file = path.resolve(src.rootKeyFile);
  let text: string;
  try {
    const st = await fs.stat(file);
    if ((st.mode & 0o077) !== 0)
      warn(`enclave: root key file ${file} is accessible to group/others; chmod 600 it`);
    text = await fs.readFile(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
      throw new EnclaveError("root_key_missing", "Root key file unreadable.", {
        details: `${file}: ${(e as NodeJS.ErrnoException).code}`,
      });
    }
    if (!src.devMode) {
      throw new EnclaveError("root_key_missing", "Root key file not found.", {
        details: `${file} does not exist (only dev mode generates a root key)`,
      });
    }
    return generateDevRootKey(file, warn);
  }
  return decodeRootKey(text, "root key file");
}

async function generateDevRootKey(file: string, warn: (msg: string) => void): Promise<Uint8Array> {
  const key = randomBytes(32);
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    // "wx": never overwrite a key that appeared meanwhile (two processes starting at once).
    await fs.writeFile(file, key.toString("hex") + "\n", { mode: 0o600, flag: "wx" });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST")
      return decodeRootKey(await fs.readFile(file, "utf8"), "root key file");
    throw e;
  }
  warn(
    `enclave: DEV MODE generated a new root key at ${file} (mode 0600). Do not use dev mode in production.`,
  );
  return Uint8Array.from(key);
}
