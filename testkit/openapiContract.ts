/**
 * The OpenAPI document as a validator of real answers: every response an HTTP test receives through
 * `Stack.api` (testkit/stack.ts) is checked against the schema the document gives for its path,
 * method and status (JSON Schema 2020-12, as OpenAPI 3.1 uses; the document's objects are closed with
 * `additionalProperties: false`, so an unknown field fails as well as a wrong type). A violation fails
 * the test that produced the response, naming the route and what differs.
 */
import Ajv2020, { type ValidateFunction } from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { buildOpenApi } from "../relayer/openapi";

type Doc = ReturnType<typeof buildOpenApi>;
interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

const DOC_ID = "sigil-openapi.json";

export interface ContractCheck {
  /** Null when the answer matches the document; otherwise why not. */
  violation(method: string, urlPath: string, status: number, body: unknown): string | null;
}

export function openApiContract(doc: Doc = placeholderDocument()): ContractCheck {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  addFormats(ajv);
  ajv.addSchema(doc as unknown as object, DOC_ID);
  const routes = Object.keys(doc.paths).map((template) => ({
    template,
    re: new RegExp("^" + template.replace(/\{[^}]+\}/g, "[^/]+") + "/?$"),
  }));
  const compiled = new Map<string, ValidateFunction>();
  const pointer = (...parts: string[]) =>
    `${DOC_ID}#/` + parts.map((p) => p.replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
  return {
    violation(method, urlPath, status, body) {
      const matching = routes.filter((r) => r.re.test(urlPath));
      const paths = doc.paths as Record<string, Record<string, Operation>>;
      const lower = method.toLowerCase();
      const route = matching.find((r) => paths[r.template][lower]) ?? matching[0];
      // No such endpoint or method: the 404/405 handlers answer with the Error envelope.
      if (!route || !paths[route.template][lower]) {
        // (The body parser may refuse such a request first: any 4xx, always in the Error envelope.)
        return status >= 400 && status < 500
          ? errorShape(ajv, pointer, body, `${method} ${urlPath} ${status}`)
          : `${method} ${urlPath} answered ${status} but is not in the OpenAPI document`;
      }
      const op = paths[route.template][lower];
      const answer = op.responses[String(status)];
      if (!answer) return `${method} ${route.template} answered ${status}, which the document does not list`;
      if (!answer.content?.["application/json"]) return null; // not JSON (metrics)
      const at = pointer(
        "paths",
        route.template,
        method.toLowerCase(),
        "responses",
        String(status),
        "content",
        "application/json",
        "schema",
      );
      let validate = compiled.get(at);
      if (!validate) {
        validate = ajv.getSchema(at);
        if (!validate) return `no schema at ${at}`;
        compiled.set(at, validate);
      }
      if (validate(body)) return null;
      return `${method} ${route.template} ${status}: ${ajv.errorsText(validate.errors, { dataVar: "body" })}`;
    },
  };
}

function errorShape(
  ajv: Ajv2020,
  pointer: (...p: string[]) => string,
  body: unknown,
  what: string,
): string | null {
  const validate = ajv.getSchema(pointer("components", "schemas", "Error"))!;
  return validate(body) ? null : `${what} 405: ${ajv.errorsText(validate.errors, { dataVar: "body" })}`;
}

export function placeholderDocument(): Doc {
  const zero = "0x0000000000000000000000000000000000000000";
  return buildOpenApi({ chainId: 0, cfg: { registryAddress: zero, forwarderAddress: zero } as never });
}

let shared: ContractCheck | null = null;
/** One validator for the whole test run (compiling schemas is the expensive part). */
export function sharedContract(): ContractCheck {
  return (shared ??= openApiContract());
}
