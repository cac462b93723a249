import { ApiError } from "../errors";

/**
 * SQLSTATE classes that mean "the database cannot be reached or cannot serve now", as opposed to a
 * bug or a constraint: 08 connection exception, 53 insufficient resources, 57 operator intervention
 * (shutdown, cancel), a read-only primary after a failover, a database closed to connections, plus
 * Node's socket errors and pg's own connection messages.
 */
export function isConnectionError(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  const code = (e as { code?: unknown }).code;
  if (typeof code === "string") {
    if (/^(08|53|57)[0-9A-Z]{3}$/.test(code)) return true;
    // A primary that became a read-only replica during a failover.
    if (code === "25006") return true;
    if (/^E(CONNREFUSED|CONNRESET|TIMEDOUT|HOSTUNREACH|NETUNREACH|PIPE|AI_AGAIN)$/.test(code)) return true;
    if (code === "ENOTFOUND") return true;
  }
  // "database … is not currently accepting connections" (55000: connections disallowed during maintenance).
  return /not currently accepting connections|Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Cannot use a pool after calling end/i.test(
    e.message,
  );
}

/** 503 database_unavailable: nothing was done; retrying later is safe. The cause is not shown to callers. */
export function databaseUnavailable(cause: unknown): ApiError {
  return new ApiError(
    "database_unavailable",
    "The service's database cannot be reached; nothing was done. Retry later.",
    {
      retryAfter: 1,
      cause,
    },
  );
}
