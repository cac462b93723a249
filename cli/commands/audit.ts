/**
 * `sigil audit export` and `sigil audit verify <file>` (docs/audit-log.md): download the account's
 * verifiable audit log as JSON Lines, and check such a file offline with the SDK's verifyAuditExport
 * (the chain recomputed, every checkpoint's signature checked against the identity you pinned from the
 * attestation). A file that does not verify exits 4 and names the first sequence number that is wrong.
 */
import * as fs from "node:fs";
import type { Command } from "commander";
import { verifyAuditAnchors, verifyAuditExport } from "sigil/sdk";
import { UsageError } from "../api";
import { contextOf } from "../context";
import { fields } from "../output";
import { EXIT_ATTESTATION_REFUSED } from "./attestation";

/** The same exit code as a refused attestation: the file was read, and it does not hold. */
export const EXIT_AUDIT_BROKEN = EXIT_ATTESTATION_REFUSED;

export function registerAudit(program: Command): void {
  const audit = program
    .command("audit")
    .description(
      "the account's verifiable audit log: export it, verify an export offline (docs/audit-log.md)",
    );
  audit
    .command("export")
    .description(
      "download the audit log as JSON Lines (account key); a time range is widened to its checkpoints",
    )
    .option("--from <time>", "from this time (ISO 8601 or ms since 1970)")
    .option("--to <time>", "until this time, exclusive (ISO 8601 or ms since 1970)")
    .option("-o, --out <file>", "write to this file instead of stdout")
    .action(async (flags: { from?: string; to?: string; out?: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const text = await client.sigil().exportAudit({ from: flags.from, to: flags.to });
      if (flags.out === undefined) {
        process.stdout.write(text);
        return;
      }
      fs.writeFileSync(flags.out, text);
      const entries = text.split("\n").filter((l) => l.includes('"type":"entry"')).length;
      out.result({ file: flags.out, entries }, () => `wrote ${entries} entries to ${flags.out}`);
    });
  audit
    .command("verify <file>")
    .description(
      `verify an export offline: the chain, and every checkpoint's signature against --identity (exits ${EXIT_AUDIT_BROKEN} at the first break)`,
    )
    .option(
      "--identity <address>",
      "the identity address from the attestation you verified (`sigil attestation verify`); default: the file's own header, which proves less",
    )
    .option(
      "--rpc <url>",
      "also check every anchored checkpoint against the chain at this RPC URL (docs/audit-log.md, Anchoring)",
    )
    .action(async (file: string, flags: { identity?: string; rpc?: string }, cmd: Command) => {
      const { out } = contextOf(cmd);
      let text: string;
      try {
        text = fs.readFileSync(file, "utf8");
      } catch (e) {
        throw new UsageError(`${file} could not be read (${(e as Error).message}).`);
      }
      const v = verifyAuditExport(text, { identity: flags.identity });
      const anchors =
        v.ok && flags.rpc !== undefined ? await verifyAuditAnchors(text, { rpcUrl: flags.rpc }) : null;
      if (anchors !== null && !anchors.ok) {
        out.result({ ...v, ok: false, anchors }, () => "verified  no");
        const b = anchors.break!;
        out.error(`audit export's anchor broken at sequence ${b.seq}: ${b.reason}: ${b.message}`);
        process.exitCode = EXIT_AUDIT_BROKEN;
        return;
      }
      if (v.ok) {
        out.result(anchors === null ? v : { ...v, anchors }, () =>
          [
            fields([
              ["verified", "yes: the chain is whole and every checkpoint is signed by the identity"],
              ["account", v.account ?? ""],
              ["identity", v.identity ?? ""],
              ["entries", `${v.entries} (${v.firstSeq ?? "-"} to ${v.lastSeq ?? "-"})`],
              ["signed through", String(v.signedThrough)],
              ...(anchors === null
                ? []
                : ([
                    ["anchored through", `${anchors.anchoredThrough} (${anchors.anchored} anchors on chain)`],
                  ] as [string, string][])),
            ]),
            ...(flags.identity === undefined
              ? ["", "note: no --identity given: checked against the identity the file names itself"]
              : []),
            ...(v.lastSeq !== null && v.signedThrough < v.lastSeq
              ? [
                  "",
                  `note: entries after ${v.signedThrough} are chained but not yet covered by a signed checkpoint`,
                ]
              : []),
          ].join("\n"),
        );
        return;
      }
      out.result(v, () => "verified  no");
      out.error(`audit export broken at sequence ${v.break!.seq}: ${v.break!.reason}: ${v.break!.message}`);
      process.exitCode = EXIT_AUDIT_BROKEN;
    });
}
