import { useEffect, useId, useRef, useState, type ReactNode } from "react";
import type { ShownError } from "../api";

export function ErrorNote({ error }: { error: ShownError | null }) {
  if (!error) return null;
  return (
    <div className="error" role="alert">
      <p>
        {error.message} <code className="code">{error.code}</code>
        {error.status ? <span className="muted"> (HTTP {error.status})</span> : null}
      </p>
      {error.fix ? (
        <p className="fix" data-testid="error-fix">
          <strong>How to fix:</strong> {error.fix}
          {error.docsUrl ? <span className="muted"> ({error.docsUrl})</span> : null}
        </p>
      ) : null}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="muted" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

export function CopyButton({ value, label }: { value: string; label: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      className="small"
      aria-label={`Copy ${label}`}
      onClick={() => {
        void navigator.clipboard?.writeText(value).then(
          () => setCopied(true),
          () => setCopied(false),
        );
      }}
    >
      {copied ? "Copied" : "Copy"}
    </button>
  );
}

/** An inline field error tied to its input with aria-describedby. */
export function Field({
  label,
  error,
  children,
  hint,
}: {
  label: string;
  error?: string | null;
  hint?: string;
  children: (props: { id: string; "aria-describedby"?: string; "aria-invalid"?: boolean }) => ReactNode;
}) {
  const id = useId();
  const described = error ? `${id}-error` : hint ? `${id}-hint` : undefined;
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children({ id, "aria-describedby": described, "aria-invalid": error ? true : undefined })}
      {hint && !error ? (
        <small id={`${id}-hint`} className="muted">
          {hint}
        </small>
      ) : null}
      {error ? (
        <small id={`${id}-error`} className="field-error" role="alert">
          {error}
        </small>
      ) : null}
    </div>
  );
}

/**
 * A button that asks first, in a modal <dialog>. The dialog owns no async state: it closes before the
 * action starts, so a slow answer can never be confirmed twice or race a second dialog.
 */
export function ConfirmButton({
  label,
  question,
  confirmLabel,
  onConfirm,
  disabled,
  danger = true,
}: {
  label: string;
  question: string;
  confirmLabel: string;
  onConfirm: () => void;
  disabled?: boolean;
  danger?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const d = dialog.current;
    return () => d?.close();
  }, []);
  return (
    <>
      <button
        type="button"
        className={danger ? "danger small" : "small"}
        disabled={disabled}
        onClick={() => dialog.current?.showModal()}
      >
        {label}
      </button>
      <dialog ref={dialog} aria-labelledby={titleId}>
        <p id={titleId}>{question}</p>
        <div className="row">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button
            type="button"
            className={danger ? "danger" : "primary"}
            onClick={() => {
              dialog.current?.close();
              onConfirm();
            }}
          >
            {confirmLabel}
          </button>
        </div>
      </dialog>
    </>
  );
}

/** A secret shown once: copy it, tick "I have saved it", continue. Lives only in component state. */
export function ShownOnce({
  title,
  value,
  onDone,
  heading = 2,
  note = "This is the only time it is shown. Sigil keeps only a hash: store it in a password manager now.",
}: {
  title: string;
  value: string;
  onDone: () => void;
  /** What the service keeps of it, and where to store it (a key's hash; a webhook secret sealed). */
  note?: string;
  /** 1 where it is the page's only content (the new account's key). */
  heading?: 1 | 2;
}) {
  const [saved, setSaved] = useState(false);
  const checkId = useId();
  return (
    <section className="once" aria-label={title}>
      {heading === 1 ? <h1>{title}</h1> : <h2>{title}</h2>}
      <p>{note}</p>
      <div className="row">
        <code className="secret" data-testid="shown-once-value">
          {value}
        </code>
        <CopyButton value={value} label={title} />
      </div>
      <div className="row">
        <input id={checkId} type="checkbox" checked={saved} onChange={(e) => setSaved(e.target.checked)} />
        <label htmlFor={checkId}>I have saved it</label>
        <button type="button" className="primary" disabled={!saved} onClick={onDone}>
          Continue
        </button>
      </div>
    </section>
  );
}

export function short(hex: string, keep = 10): string {
  return hex.length > keep * 2 + 1 ? `${hex.slice(0, keep)}…${hex.slice(-keep + 2)}` : hex;
}
