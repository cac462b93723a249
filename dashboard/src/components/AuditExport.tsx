/**
 * The verifiable export of the Activity page: download the JSON Lines export of a time range, then check
 * it here with the SDK's offline verifier (the same one `sigil audit verify` runs) against an identity
 * address. The identity is prefilled from this service's attestation document (its signature checked,
 * with a fresh nonce); someone who must not trust the operator pastes the identity they verified
 * themselves. Any .jsonl file can be checked, not only the one just downloaded. The export is the
 * account's activity, not a secret: it lives in this component's memory only and is never stored.
 */
import { useEffect, useState } from "react";
import { isAddress } from "ethers";
import { verifyAttestation, verifyAuditExport, type AuditVerification } from "../../../sdk";
import { describeError, type Session, type ShownError } from "../api";
import { downloadText, localToIso, rangeError } from "../audit";
import { useAction } from "../useLoad";
import { AuditErrorNote } from "./AuditErrorNote";
import { Field, short } from "./ui";

interface Downloaded {
  fileName: string;
  text: string;
}

interface Checked {
  fileName: string;
  result: AuditVerification;
  identityGiven: boolean;
}

function randomNonce(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

export function AuditExport({ session }: { session: Session }) {
  const { sigil } = session;
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const [downloaded, setDownloaded] = useState<Downloaded | null>(null);
  const exporting = useAction();
  const badRange = rangeError(from, to);

  const [identity, setIdentity] = useState("");
  const [attested, setAttested] = useState<{ identity: string; tee: string } | null>(null);
  const [attestationError, setAttestationError] = useState<ShownError | null>(null);
  const [checked, setChecked] = useState<Checked | null>(null);
  const [fileError, setFileError] = useState<string | null>(null);

  useEffect(() => {
    let live = true;
    const nonce = randomNonce();
    sigil.attestation(nonce).then(
      (doc) => {
        if (!live) return;
        try {
          const v = verifyAttestation(doc, { nonce });
          setAttested({ identity: v.identity, tee: String(v.tee) });
          setIdentity((current) => current || v.identity);
        } catch (e) {
          setAttestationError(describeError(e));
        }
      },
      (e: unknown) => live && setAttestationError(describeError(e)),
    );
    return () => {
      live = false;
    };
  }, [sigil]);

  const identityError =
    identity && !isAddress(identity.trim()) ? "Not an address (0x and 40 hex digits)." : null;

  const check = (fileName: string, text: string) => {
    const pinned = identity.trim();
    setChecked({
      fileName,
      result: verifyAuditExport(text, pinned ? { identity: pinned } : {}),
      identityGiven: pinned !== "",
    });
  };

  const download = () =>
    void exporting
      .run(() =>
        sigil.exportAudit({
          ...(from ? { from: localToIso(from) } : {}),
          ...(to ? { to: localToIso(to) } : {}),
        }),
      )
      .then((text) => {
        if (text === undefined) return;
        const stamp = new Date().toISOString().replace(/[:.]/g, "-");
        const fileName = `sigil-audit-${stamp}.jsonl`;
        downloadText(fileName, text, "application/x-ndjson");
        setDownloaded({ fileName, text });
        setChecked(null);
      });

  return (
    <section aria-labelledby="audit-export-title">
      <h2 id="audit-export-title">Verifiable export</h2>
      <p className="muted">
        JSON Lines: a header, the entries in order and the checkpoints the service's identity key signed. A
        range is widened to the checkpoints around it, so the file verifies on its own. Leave both times empty
        for the whole log.
      </p>
      <form
        className="inline-form"
        aria-label="Export the activity"
        onSubmit={(e) => {
          e.preventDefault();
          if (!badRange) download();
        }}
      >
        <Field label="Export from" hint="Your local time">
          {(p) => (
            <input {...p} type="datetime-local" value={from} onChange={(e) => setFrom(e.target.value)} />
          )}
        </Field>
        <Field label="Export to" error={badRange} hint="Your local time, not included">
          {(p) => <input {...p} type="datetime-local" value={to} onChange={(e) => setTo(e.target.value)} />}
        </Field>
        <button type="submit" className="primary" disabled={exporting.pending || !!badRange}>
          {exporting.pending ? "Exporting…" : "Download export"}
        </button>
      </form>
      <AuditErrorNote error={exporting.error} />
      {downloaded ? (
        <p role="status" data-testid="audit-downloaded">
          Downloaded <code>{downloaded.fileName}</code> ({downloaded.text.split("\n").filter(Boolean).length}{" "}
          lines).
        </p>
      ) : null}

      <h3>Verify an export</h3>
      <p className="muted">
        Recomputes every entry's hash and link and checks every checkpoint's signature against the identity
        below, here in your browser. The identity is filled in from this service's attestation document
        {attested ? ` (signature checked, TEE: ${attested.tee})` : ""}; to verify without trusting the
        operator, paste the identity of an attestation you verified yourself.
      </p>
      <AuditErrorNote error={attestationError} />
      <Field label="Identity address" error={identityError} hint="The attestation's identity key address">
        {(p) => (
          <input
            {...p}
            value={identity}
            spellCheck={false}
            onChange={(e) => {
              setIdentity(e.target.value);
              setChecked(null);
            }}
          />
        )}
      </Field>
      <div className="inline-form">
        <button
          type="button"
          disabled={!downloaded || !!identityError}
          onClick={() => downloaded && check(downloaded.fileName, downloaded.text)}
        >
          Verify the downloaded export
        </button>
        <Field label="Or verify a file" error={fileError}>
          {(p) => (
            <input
              {...p}
              type="file"
              accept=".jsonl,application/x-ndjson,text/plain"
              disabled={!!identityError}
              onChange={(e) => {
                const file = e.target.files?.[0];
                e.target.value = "";
                if (!file) return;
                setFileError(null);
                file.text().then(
                  (text) => check(file.name, text),
                  () => setFileError("The file could not be read."),
                );
              }}
            />
          )}
        </Field>
      </div>
      {checked ? <VerificationResult checked={checked} /> : null}
    </section>
  );
}

function VerificationResult({ checked: { fileName, result: v, identityGiven } }: { checked: Checked }) {
  if (v.ok)
    return (
      <div role="status" data-testid="audit-verified" className="card">
        <p className="verified">
          <strong>Verified:</strong> <code>{fileName}</code> holds entries {v.firstSeq ?? "–"} to{" "}
          {v.lastSeq ?? "–"} ({v.entries} entries, {v.checkpoints} signed checkpoints) of account {v.account},
          chained without a gap, signed through entry {v.signedThrough} by{" "}
          <code title={v.identity ?? ""}>{short(v.identity ?? "")}</code>.
        </p>
        {identityGiven ? null : (
          <p className="muted">
            No identity was given, so the file's own was believed: this proves the file is consistent, not
            that the attested service signed it.
          </p>
        )}
        {v.lastSeq !== null && v.signedThrough < v.lastSeq ? (
          <p className="muted">
            Entries after {v.signedThrough} are chained but not yet signed: a later export covers them.
          </p>
        ) : null}
      </div>
    );
  return (
    <div className="error" role="alert" data-testid="audit-broken">
      <p>
        <strong>Does not verify:</strong> <code>{fileName}</code> breaks at entry{" "}
        <strong data-testid="audit-break-seq">{v.break?.seq}</strong>{" "}
        <code className="code">{v.break?.reason}</code>
      </p>
      <p>{v.break?.message}</p>
    </div>
  );
}
