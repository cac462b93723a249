/**
 * An audit-log failure, inline, with what it means on this page: the log is the account's, so a usage
 * key's `owner_only` says who can read it instead of leaving a bare 403.
 */
import type { ShownError } from "../api";
import { ErrorNote } from "./ui";

const EXPLAINED: Record<string, string> = {
  owner_only:
    "The activity log belongs to the account: sign in with the account key (ak_…), or as the owner with a wallet, to read or export it. A usage key runs actions; it cannot read the log.",
  invalid_request: "A filter could not be read: check the field the message names.",
};

export function AuditErrorNote({ error }: { error: ShownError | null }) {
  if (!error) return null;
  const why = EXPLAINED[error.code];
  return (
    <>
      <ErrorNote error={error} />
      {why ? (
        <p className="muted" data-testid="audit-error-explained">
          {why}
        </p>
      ) : null}
    </>
  );
}
