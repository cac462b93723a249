/**
 * Prints the measurement of enclave/ in a checkout (docs/enclave.md, "Attestation"), to compare with the
 * `measurement` a deployment's GET /core/v1/attestation reports.
 *
 *   npx ts-node --transpile-only scripts/enclave-measurement.ts [checkout] [--listing]
 *
 * `--listing` also prints the exact text that is hashed, so a difference can be traced to a file or a
 * dependency.
 */
import * as path from "node:path";
import { measureEnclave } from "../enclave";

const args = process.argv.slice(2);
const root = path.resolve(args.find((a) => !a.startsWith("--")) ?? path.join(__dirname, ".."));
const m = measureEnclave(root);
if (args.includes("--listing")) process.stdout.write(m.listing);
console.log(m.measurement);
