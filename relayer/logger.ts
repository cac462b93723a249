/**
 * Structured logs (pino). The request logger writes method, route pattern (never the raw URL, which
 * could carry a key someone pasted into a path), status, duration and ids; never headers or bodies.
 * Redaction of key-bearing fields is a second line of defence for any object someone logs by mistake.
 */
import pino, { type Logger } from "pino";

export const REDACT_PATHS = [
  "req.headers.authorization",
  "req.headers['x-api-key']",
  "headers.authorization",
  "headers['x-api-key']",
  "*.headers.authorization",
  "*.headers['x-api-key']",
  "api_key",
  "usage_api_key",
  "apiKey",
  "*.api_key",
  "*.usage_api_key",
  "*.apiKey",
  "body",
  "*.body",
];

export function defaultLogger(): Logger {
  return pino({
    name: "sigil-relayer",
    level: process.env.SIGIL_LOG_LEVEL ?? "info",
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
  });
}
