/**
 * An endpoint is one declaration: its method and path, who may call it, its parameters, body and answer
 * schemas, the error codes it can answer, its documentation and its handler. The Express registration
 * (`declaredRouter`), the 405 table (read off the routers built here) and the OpenAPI operation
 * (`operationOf`) are all derived from it, so none of them can describe a route the others lack.
 */
import express, { type Request, type RequestHandler, type Response } from "express";
import type { ScopeEntry } from "../../vocabulary/scopes";
import { catalogueEntry, type ErrorCode } from "../errors";
import { bodyErrors, compileBody, type FieldCheck } from "./bodySchema";

export type Schema = Record<string, unknown>;

declare const VALUE: unique symbol;
declare const FILLED: unique symbol;
/**
 * A schema that also tells TypeScript what reading a value by it gives (V), and whether the field is
 * always there once read (`Filled`: it has a default). Nothing of this exists at run time.
 */
export type Typed<V, Filled extends boolean = false> = Schema & {
  readonly [VALUE]?: V;
  readonly [FILLED]?: Filled;
};
/** A read field: there when required or defaulted, else possibly undefined. */
type FieldOf<S, Required extends boolean> =
  S extends Typed<infer V, infer F>
    ? Required extends true
      ? V
      : F extends true
        ? V
        : V | undefined
    : unknown;
/** The read body of an object schema with these properties, `R` of them required. */
export type ObjectOf<P, R> = { [K in keyof P]: FieldOf<P[K], K extends R ? true : false> };
/** What a handler receives for a body declared by the schema S. */
export type BodyOf<S> = S extends Typed<infer B, boolean> ? B : Body;
export type Body = Record<string, unknown>;

/**
 * Who may call an endpoint. "key": the account key or a usage key (bearer or signed request; the handler
 * checks the usage key's scope, listed in `scopes`); "account": the account key only (an owner's wallet
 * session may read); "owner": the account key or the owner's wallet session, which may also write here,
 * because these endpoints change the service's own records and never the registry (triggers); "session":
 * a wallet sign-in's session key signs the request itself and the handler checks it; "public": no
 * credential.
 */
export type Caller = "public" | "key" | "account" | "owner" | "session";

/** What a JSON handler answers: the status (200 unless given) and the body. */
export interface HandlerResult {
  status?: number;
  body: unknown;
}

export interface Endpoint<C> {
  method: "GET" | "POST" | "DELETE";
  /** The Express path under the prefix its group is mounted at ("/groups/:id"). */
  path: string;
  caller: Caller;
  /**
   * For a usage key: the scopes of which it needs one (the handler checks them, for the groups the
   * request names, and the registry checks again); listed in the operation as `x-sigil-scopes`.
   */
  scopes?: ReadonlyArray<ScopeEntry["name"]>;
  summary: string;
  description?: string;
  tags?: string[];
  /** OpenAPI parameter objects: path ids, query strings, headers. */
  params?: unknown[];
  /**
   * The request body's schema: `declaredRouter` reads the body by it before the handler runs
   * (bodySchema.ts) and hands the handler what it read.
   */
  body?: Schema;
  /** The declaration's own checks of some body fields (a limit from the configuration, say). */
  checks?: Record<string, FieldCheck<C>>;
  /** Why the handler reads `req.body` itself instead (billing's: raw bytes, its own parser). */
  ownBody?: string;
  /** The success status (200 unless given) and the answer's schema. */
  status?: number;
  answer: Schema;
  /** The answer's media type when it is not one JSON document (JSON Lines: "application/x-ndjson"). */
  answerMediaType?: string;
  /** A second success answer (e.g. 202 "processing", 503 "degraded") with its own schema. */
  alsoAnswers?: { status: number; description: string; schema: Schema };
  /**
   * The codes this endpoint itself can answer. The caller's and the guard's common ones are added, and
   * so are those its body implies (`BODY_ERRORS`, and what reading it by `body` can refuse: bodyErrors).
   */
  errors: readonly ErrorCode[];
  /** A hand-written OpenAPI operation, for an answer that is not JSON (GET /metrics). */
  operation?: Record<string, unknown>;
  /** Fields of the answer that hold a secret (see `HandlerOptions` in context.ts). */
  secretFields?: { names: string[]; mode: "encrypt" | "drop" };
  /** Middleware the handler needs before it runs (billing's own body parsers). */
  before?: RequestHandler[];
  /** Registered only when this holds (billing's simulated processor); documented always. */
  when?: (c: C) => boolean;
  /**
   * The handler. It returns the JSON answer, or nothing when it wrote the answer itself (`res`):
   * `/health`'s two statuses, `/metrics`' text, billing's own answers. `body` is the body as read by
   * the declared schema (`{}` without one).
   */
  handle(c: C, req: Request, res: Response, body: Body): Promise<HandlerResult | void>;
}

/** Declares an endpoint: its method and path, then the rest (the context its handler receives is typed). */
export function endpoint<C>(
  method: Endpoint<C>["method"],
  path: string,
  e: Omit<Endpoint<C>, "method" | "path">,
): Endpoint<C> {
  return { method, path, ...e };
}

/** Endpoints mounted under one prefix, in the order Express tries them and the document lists them. */
export interface EndpointGroup<C> {
  prefix: string;
  endpoints: ReadonlyArray<Endpoint<C>>;
}

/**
 * A router built from declarations only: an Express handler that carries its endpoints. It has no
 * `.get`/`.post`, so nothing can be added to it afterwards, and the app mounts nothing else.
 */
export type DeclaredRouter = RequestHandler & { readonly declared: ReadonlyArray<Endpoint<never>> };

export interface RouterOptions<C> {
  /** The middleware that admits each kind of caller ("public" and "session" need none). */
  guards: Partial<Record<Caller, RequestHandler[]>>;
  /**
   * Turns a declaration into the request handler (the relayer adds Idempotency-Key replays here). The
   * declaration it receives reads its body before its handler runs.
   */
  run: (e: Runnable<C>) => RequestHandler;
  /** An error handler of the router's own (billing's, which is also mounted without the relayer). */
  onError?: express.ErrorRequestHandler;
}

/** The one way to register endpoints: each declaration becomes one route, in the order given. */
export function declaredRouter<C>(
  c: C,
  endpoints: ReadonlyArray<Endpoint<C>>,
  opts: RouterOptions<C>,
): DeclaredRouter {
  const r = express.Router();
  const declared = endpoints.filter((e) => !e.when || e.when(c));
  for (const e of declared) {
    const verb = e.method.toLowerCase() as "get" | "post" | "delete";
    r[verb](e.path, ...(opts.guards[e.caller] ?? []), ...(e.before ?? []), opts.run(readingBody(e)));
  }
  if (opts.onError) r.use(opts.onError);
  return Object.assign(r, { declared: declared as ReadonlyArray<Endpoint<never>> }) as DeclaredRouter;
}

/**
 * The declaration with a handler that first reads the body by the declared schema, compiled once here.
 * The read happens inside the handler, where the body parser's own refusals and Idempotency-Key replays
 * already are, so a refused body answers exactly as a handler's own refusal did.
 */
function readingBody<C>(e: Endpoint<C>): Runnable<C> {
  if (e.ownBody !== undefined || !e.body) return { ...e, handle: (c, req, res) => e.handle(c, req, res, {}) };
  const read = compileBody(e.body, e.checks);
  return { ...e, handle: (c, req, res) => e.handle(c, req, res, read(req.body, c)) };
}

/** A declaration whose handler reads its own body (`readingBody`): what a router's `run` receives. */
export type Runnable<C> = Omit<Endpoint<C>, "handle"> & {
  handle(c: C, req: Request, res: Response): Promise<HandlerResult | void>;
};

/** Runs a declaration as is: its JSON answer, or none if it wrote its own (billing's: no replays here). */
export function runPlain<C>(c: C, e: Runnable<C>): RequestHandler {
  return async (req, res) => {
    const out = await e.handle(c, req, res);
    if (out) res.status(out.status ?? 200).json(out.body);
  };
}

/** "/groups/:id" under "/core/v1" → "/core/v1/groups/{id}" (OpenAPI's form). */
export function openApiPath(prefix: string, path: string): string {
  return (prefix + path).replace(/:([a-z_]+)/g, "{$1}");
}

/** What any caller with a credential can be refused for before the route runs. */
const CREDENTIAL_ERRORS: readonly ErrorCode[] = [
  "missing_api_key",
  "invalid_api_key",
  "unknown_api_key",
  "api_key_expired",
  "rate_limited",
  "signature_malformed",
  "signature_body_mismatch",
  "signature_expired",
  "signature_invalid",
  "signature_replayed",
  // A wallet sign-in's session (relayer/http/siwe.ts) is checked on every request it signs.
  "siwe_invalid",
  "siwe_wrong_domain",
  "siwe_wrong_chain",
  "siwe_expired",
  "siwe_not_owner",
  "siwe_owner_is_contract",
  "siwe_read_only",
  "siwe_session_revoked",
  // Authentication reads the permission cache, which needs the chain until it has synced.
  "chain_unavailable",
];
/**
 * The HTTP guard (http/guard.ts) answers these on every operation, before any route runs; with
 * PostgreSQL the per-IP limit, which also runs before every route, reads the shared database.
 */
const GUARD_ERRORS: readonly ErrorCode[] = [
  "json_too_deep",
  "header_too_long",
  "invalid_query",
  "invalid_idempotency_key",
  "database_unavailable",
];

/** What any request with a body can be refused for before its route runs (body parser, Idempotency-Key). */
export const BODY_ERRORS: readonly ErrorCode[] = [
  "invalid_json",
  "payload_too_large",
  "unsupported_media_type",
  "invalid_idempotency_key",
  "idempotency_key_reused",
  // A duplicate still waiting for the first request (on any instance sharing the database) after 30 s.
  "idempotency_key_in_flight",
];

/** The codes a declaration's body implies: the body parser's, and its schema's unless it reads its own. */
function impliedByBody(e: Endpoint<never>): readonly ErrorCode[] {
  if (!e.body) return [];
  if (e.ownBody !== undefined) return BODY_ERRORS;
  return [...BODY_ERRORS, ...bodyErrors(e.body, Object.keys(e.checks ?? {}))];
}

const errorRef = { $ref: "#/components/schemas/Error" };
const json = (schema: Schema) => ({ "application/json": { schema } });

/** The OpenAPI operation of a declaration: its answers, one entry per error status, grouped by code. */
export function operationOf(e: Endpoint<never>): Record<string, unknown> {
  if (e.operation) return e.operation;
  const responses: Record<string, unknown> = {
    [String(e.status ?? 200)]: {
      description: "OK",
      content: e.answerMediaType ? { [e.answerMediaType]: { schema: e.answer } } : json(e.answer),
    },
  };
  const byStatus = new Map<number, string[]>();
  const common = e.caller === "public" ? [] : CREDENTIAL_ERRORS;
  const codes = new Set([...common, ...GUARD_ERRORS, ...impliedByBody(e), ...e.errors]);
  for (const code of [...codes, "internal_error" as const]) {
    const entry = catalogueEntry(code);
    if (!entry) throw new Error(`openapi: ${code} is in no error catalogue`);
    const codes = byStatus.get(entry.status) ?? [];
    if (!codes.includes(code)) byStatus.set(entry.status, [...codes, code]);
  }
  for (const [status, codes] of byStatus)
    responses[String(status)] = { description: codes.join(", "), content: json(errorRef) };
  if (e.alsoAnswers)
    responses[String(e.alsoAnswers.status)] = {
      description: e.alsoAnswers.description,
      content: json(e.alsoAnswers.schema),
    };
  return {
    summary: e.summary,
    ...(e.description ? { description: e.description } : {}),
    ...(e.tags ? { tags: e.tags } : {}),
    ...(e.caller === "public" ? { security: [] } : {}),
    // Who may call it, for readers of the document (the generated SDK types ignore x- extensions).
    "x-sigil-caller": e.caller,
    ...(e.scopes ? { "x-sigil-scopes": e.scopes } : {}),
    ...(e.params ? { parameters: e.params } : {}),
    ...(e.body ? { requestBody: { required: true, content: json(e.body) } } : {}),
    responses,
  };
}
