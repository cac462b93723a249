/**
 * Regenerates sdk/generated/schema.ts (the SDK's request and response types) from the OpenAPI document.
 *
 *   npx ts-node --transpile-only sdk/scripts/generateTypes.ts            # the document this checkout serves
 *   npx ts-node --transpile-only sdk/scripts/generateTypes.ts <url>      # a running relayer's document
 *
 * test/sdk/generatedTypes.test.ts regenerates from a running relayer's served document and fails when
 * the committed file differs, so the types cannot drift from the server.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { schemaTypes } from "../generateSchemaTypes";

export const SCHEMA_FILE = path.join(__dirname, "..", "generated", "schema.ts");

async function localDocument(): Promise<Record<string, unknown>> {
  // Loaded lazily: only this mode needs the relayer's sources (a published SDK has only the URL mode).
  const { buildOpenApi } = await import("../../relayer/openapi");
  const placeholder = "0x0000000000000000000000000000000000000000";
  return buildOpenApi({
    chainId: 0,
    cfg: { registryAddress: placeholder, forwarderAddress: placeholder } as never,
  }) as unknown as Record<string, unknown>;
}

async function main(): Promise<void> {
  const url = process.argv[2];
  const doc = url ? ((await (await fetch(url)).json()) as Record<string, unknown>) : await localDocument();
  fs.writeFileSync(SCHEMA_FILE, await schemaTypes(doc));
  console.log(`wrote ${path.relative(process.cwd(), SCHEMA_FILE)}`);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
