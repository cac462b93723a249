/**
 * Signing policies (docs/policies.md): the document's schema, the parsing of what is signed, and the
 * evaluation of rules. Pure functions: no keys, no I/O.
 */
export * from "./schema";
export * from "./operation";
export * from "./chainOperations";
export * from "./evaluate";
export * from "./window";
export type { Erc20Call, PermitGrant } from "./erc20";
export * from "./stateless";
export * from "./freeze";
