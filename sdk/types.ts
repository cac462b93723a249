/**
 * Request and answer types picked out of the generated schema (generated/schema.ts) by path and
 * method: nothing here is written by hand.
 */
import type { paths } from "./generated/schema";

export type { paths, components } from "./generated/schema";

type Method = "get" | "post" | "delete";
export type PathWith<M extends Method> = {
  [P in keyof paths]: paths[P] extends Record<M, { responses: unknown }> ? P : never;
}[keyof paths];

type Responses<P extends keyof paths, M extends Method> = paths[P][M] extends { responses: infer R }
  ? R
  : never;
type JsonOf<R> = R extends { content: { "application/json": infer J } } ? J : never;

/** The success answer of an operation (its 200 or 201 JSON). */
export type Answer<P extends keyof paths, M extends Method> =
  Responses<P, M> extends infer R
    ? R extends { 200: infer A }
      ? JsonOf<A>
      : R extends { 201: infer A }
        ? JsonOf<A>
        : never
    : never;

/** The JSON body an operation takes. */
export type Body<P extends keyof paths, M extends Method> = paths[P][M] extends {
  requestBody?: { content: { "application/json": infer B } };
}
  ? B
  : never;

/** An operation's query parameters. */
export type Query<P extends keyof paths, M extends Method> = paths[P][M] extends {
  parameters: { query?: infer Q };
}
  ? Q
  : never;

export type ExecutionResult = Answer<"/core/v1/svc_action", "post">;
export type ExecuteParams = Body<"/core/v1/svc_action", "post">;
export type Pkp = Answer<"/core/v1/pkps/{id}", "get">;
export type Group = Answer<"/core/v1/groups/{id}", "get">;
export type UsageKey = Answer<"/core/v1/list_api_keys", "get">["items"][number];
export type SigilConfig = Answer<"/core/v1/config", "get">;
