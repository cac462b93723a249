/**
 * The Safe tool's defaults come from the same configuration `npm start` reads (environment first, then
 * sigil.config.json or SIGIL_CONFIG), so that after `SIGIL_ANVIL_PORT=8546 npm start` the tool finds
 * that chain and that data folder without --rpc / --data-dir on every call. Only the two settings it
 * needs are read; a problem elsewhere in the configuration is `npm start`'s to report, not this tool's.
 */
import * as path from "node:path";
import { readConfigFile } from "../../start/config";

export interface SafeToolDefaults {
  rpcUrl: string;
  dataDir: string;
}

export function startSettings(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): SafeToolDefaults {
  const { values } = readConfigFile(env, cwd, []);
  const get = (name: "SIGIL_RPC_URL" | "SIGIL_ANVIL_PORT" | "SIGIL_DATA_DIR") =>
    env[name]?.trim() || values[name]?.trim() || undefined;
  const port = get("SIGIL_ANVIL_PORT");
  // 0 means "any free port" to npm start; the tool cannot know which one it got, so it uses the default.
  const anvilPort = port !== undefined && /^\d+$/.test(port) && Number(port) > 0 ? Number(port) : 8545;
  return {
    rpcUrl: get("SIGIL_RPC_URL") ?? `http://127.0.0.1:${anvilPort}`,
    dataDir: path.resolve(cwd, get("SIGIL_DATA_DIR") ?? ".sigil"),
  };
}
