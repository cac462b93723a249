/** Path B with Safe multisigs: the library behind scripts/safe/cli.ts (tests call it directly). */
export * from "./errors";
export * from "./chain";
export * from "./deployments";
export * from "./kit";
export * from "./registryCalls";
export * from "./registryAddress";
export * from "./proposals";
export * from "./keys";
export * from "./groupHistory";
