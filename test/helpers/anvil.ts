/**
 * A real local chain (anvil on a free port): lives in testkit/anvil.ts, which the benchmarks share with the tests
 * (bench/ must not import test/). Re-exported here so tests keep importing their helpers from one folder.
 */
export * from "../../testkit/anvil";
