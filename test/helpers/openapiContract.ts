/**
 * The OpenAPI document as a validator of real answers: lives in testkit/openapiContract.ts, which the benchmarks share with the tests
 * (bench/ must not import test/). Re-exported here so tests keep importing their helpers from one folder.
 */
export * from "../../testkit/openapiContract";
