/**
 * A whole service (chain, contracts, relayer) with an HTTP client: lives in testkit/stack.ts, which the benchmarks share with the tests
 * (bench/ must not import test/). Re-exported here so tests keep importing their helpers from one folder.
 */
export * from "../../testkit/stack";
