/**
 * `sigil attestation verify`: checks that the service the CLI talks to (or a saved document) is what the
 * caller expects, with the SDK's verifyAttestation / verifyTdxAttestation (docs/enclave.md, "Verifying").
 * A failed check says which one, by its stable reason, and exits 4; nothing is fetched from anywhere the
 * caller did not name (the service, and the PCCS given with --pccs-url).
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import type { Command } from "commander";
import {
  AttestationError,
  verifyAttestation,
  verifyTdxAttestation,
  type AttestationDocument,
  type TcbStatus,
  type TdxCollateral,
} from "sigil/sdk";
import { UsageError } from "../api";
import { contextOf } from "../context";
import { fields } from "../output";

/** The exit code of a refused attestation: the service answered, and the answer did not hold. */
export const EXIT_ATTESTATION_REFUSED = 4;

interface VerifyFlags {
  document?: string;
  nonce?: string;
  expectIdentity?: string;
  expectMeasurement?: string;
  expectChainId?: string;
  expectRegistry?: string;
  expectForwarder?: string;
  requireTee?: boolean;
  expectComposeHash?: string;
  expectMrtd?: string;
  expectAppId?: string;
  collateral?: string;
  pccsUrl?: string;
  at?: string;
  acceptTcb?: string;
}

function readJson<T>(file: string, what: string): T {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as T;
  } catch (e) {
    throw new UsageError(`${what} ${file} could not be read as JSON (${(e as Error).message}).`);
  }
}

/** --at: an ISO 8601 time or unix seconds (to check saved collateral at the time it was valid). */
function parseAt(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (/^\d+$/.test(v)) return Number(v);
  const ms = Date.parse(v);
  if (Number.isNaN(ms))
    throw new UsageError(`--at ${JSON.stringify(v)} is neither an ISO 8601 time nor unix seconds.`);
  return Math.floor(ms / 1000);
}

export function registerAttestation(program: Command): void {
  const attestation = program
    .command("attestation")
    .description("check what the service runs and which key speaks for it (docs/enclave.md)");
  attestation
    .command("verify")
    .description(
      `fetch GET /core/v1/attestation with a fresh nonce (or read --document) and verify it; a tdx document's ` +
        `quote is checked against Intel's collateral (--collateral or --pccs-url). Exits ${EXIT_ATTESTATION_REFUSED} ` +
        "naming the check that failed",
    )
    .option("--document <file>", "verify this saved document instead of asking the service")
    .option("--nonce <nonce>", "the nonce to send (default: a random one), or the one a --document must echo")
    .option("--expect-identity <address>", "the identity address you pinned")
    .option(
      "--expect-measurement <0x…>",
      "the measurement of enclave/ you computed (scripts/enclave-measurement.ts)",
    )
    .option("--expect-chain-id <id>", "the chain the deployment must write to")
    .option("--expect-registry <address>", "the registry it must use")
    .option("--expect-forwarder <address>", "the forwarder it must use")
    .option("--require-tee", 'refuse a document without hardware evidence (tee "none")')
    .option(
      "--expect-compose-hash <0x…>",
      "tdx: the compose hash of the build you reviewed (scripts/tee/compose-hash.ts)",
    )
    .option("--expect-mrtd <0x…>", "tdx: the MRTD of the dstack OS image you trust")
    .option("--expect-app-id <0x…>", "tdx: the dstack app id (stable across approved upgrades)")
    .option("--collateral <file>", "tdx: Intel's collateral for the quote, as JSON")
    .option("--pccs-url <url>", "tdx: fetch the collateral from this PCCS (nothing is fetched otherwise)")
    .option(
      "--at <time>",
      "tdx: check the collateral's validity at this time (ISO 8601 or unix seconds; default now)",
    )
    .option("--accept-tcb <statuses>", "tdx: comma-separated TCB statuses to accept (default UpToDate)")
    .action(async (flags: VerifyFlags, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      let doc: AttestationDocument;
      let nonce = flags.nonce;
      if (flags.document !== undefined) {
        doc = readJson<AttestationDocument>(flags.document, "--document");
      } else {
        nonce ??= randomBytes(16).toString("hex");
        doc = await client.request<AttestationDocument>("GET", "/core/v1/attestation", {
          auth: false,
          query: { nonce },
        });
      }
      const chainId = flags.expectChainId === undefined ? undefined : Number(flags.expectChainId);
      if (chainId !== undefined && !Number.isSafeInteger(chainId))
        throw new UsageError(`--expect-chain-id ${JSON.stringify(flags.expectChainId)} is not a chain id.`);
      const opts = {
        nonce,
        expectedIdentity: flags.expectIdentity,
        expectedMeasurement: flags.expectMeasurement,
        expectedChainId: chainId,
        expectedRegistry: flags.expectRegistry,
        expectedForwarder: flags.expectForwarder,
        requireTee: flags.requireTee === true,
      };
      try {
        if (doc?.tee === "tdx") {
          const v = await verifyTdxAttestation(doc, {
            ...opts,
            expectedComposeHash: flags.expectComposeHash,
            expectedMrTd: flags.expectMrtd,
            expectedAppId: flags.expectAppId,
            collateral:
              flags.collateral === undefined
                ? undefined
                : readJson<TdxCollateral>(flags.collateral, "--collateral"),
            pccsUrl: flags.pccsUrl,
            now: parseAt(flags.at),
            acceptedTcbStatuses: flags.acceptTcb?.split(",").map((s) => s.trim() as TcbStatus),
          });
          const result = { verified: true, ...v };
          out.result(result, () =>
            [
              fields([
                ["verified", "yes: Intel-signed TDX quote bound to this document"],
                ["tee", v.tee],
                ["tcb status", v.tcbStatus],
                ["compose hash", v.composeHash],
                ["mrtd", v.report.mrTd],
                ["identity", v.identity],
                ["measurement", v.measurement],
              ]),
              "",
              ...v.caveats.map((c) => `note: ${c}`),
            ].join("\n"),
          );
        } else {
          const v = verifyAttestation(doc, opts);
          out.result({ verified: true, ...v }, () =>
            [
              fields([
                [
                  "verified",
                  "yes: signed by the identity it names" + (nonce ? ", fresh (nonce echoed)" : ""),
                ],
                ["tee", v.tee],
                ["identity", v.identity],
                ["measurement", v.measurement],
              ]),
              "",
              ...v.caveats.map((c) => `note: ${c}`),
            ].join("\n"),
          );
        }
      } catch (e) {
        if (!(e instanceof AttestationError)) throw e;
        out.result({ verified: false, reason: e.reason, message: e.message }, () => "verified  no");
        out.error(`attestation refused: ${e.reason}: ${e.message}`);
        process.exitCode = EXIT_ATTESTATION_REFUSED;
      }
    });
}
