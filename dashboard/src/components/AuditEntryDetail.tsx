/**
 * Every field of one audit entry: its place in the chain (sequence, hash, previous hash) and each field
 * of its `data` as the service chained it. Strings and numbers as they are; lists and objects as JSON.
 */
import type { AuditItem } from "../audit";
import { KIND_LABELS } from "../audit";
import { CopyButton } from "./ui";

export function AuditEntryDetail({ entry, onClose }: { entry: AuditItem; onClose: () => void }) {
  const chain: [string, string][] = [
    ["Sequence", String(entry.seq)],
    ["Type", `${KIND_LABELS[entry.kind] ?? entry.kind} (${entry.kind})`],
    ["Time", `${entry.time} (${entry.time_ms} ms)`],
    ["Account", entry.account],
    ["Hash", entry.hash],
    ["Previous hash", entry.prev_hash],
  ];
  return (
    <section className="card" aria-labelledby="audit-entry-title" data-testid="audit-entry-detail">
      <div className="row">
        <h2 id="audit-entry-title">Entry {entry.seq}</h2>
        <span className="spacer" />
        <button type="button" className="small" onClick={onClose}>
          Close
        </button>
      </div>
      <dl className="fields">
        {chain.map(([k, v]) => (
          <Pair key={k} name={k} value={v} copy={k.endsWith("hash") || k === "Hash"} />
        ))}
      </dl>
      <h3>Data</h3>
      <dl className="fields" data-testid="audit-entry-data">
        {Object.entries(entry.data).map(([k, v]) => (
          <Pair key={k} name={k} value={v} />
        ))}
      </dl>
    </section>
  );
}

function Pair({ name, value, copy }: { name: string; value: unknown; copy?: boolean }) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  const block = typeof value === "object" && value !== null;
  return (
    <div data-field={name}>
      <dt>{name}</dt>
      <dd>
        {block ? <pre className="code">{text}</pre> : <code>{text}</code>}
        {copy ? (
          <>
            {" "}
            <CopyButton value={text} label={name} />
          </>
        ) : null}
      </dd>
    </div>
  );
}
