// Shared assertions for the enclave tests (no tests of its own).
import { expect } from "chai";
import { EnclaveError } from "../../enclave";

export function expectEnclaveError(fn: () => unknown, code: string): EnclaveError {
  try {
    fn();
  } catch (e) {
    expect(e, String(e)).to.be.instanceOf(EnclaveError);
    expect((e as EnclaveError).code).to.equal(code);
    return e as EnclaveError;
  }
  return expect.fail(`expected EnclaveError(${code})`);
}

export async function expectEnclaveRejection(p: Promise<unknown>, code: string): Promise<EnclaveError> {
  try {
    await p;
  } catch (e) {
    expect(e, String(e)).to.be.instanceOf(EnclaveError);
    expect((e as EnclaveError).code).to.equal(code);
    return e as EnclaveError;
  }
  return expect.fail(`expected EnclaveError(${code})`);
}
