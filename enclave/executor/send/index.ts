/**
 * `Actions.sendTransaction` (docs/actions.md, "EVM send"): the executor side. The relayer hands the
 * executor its chain list as `{chainId, rpcUrl}` pairs (the enclave never imports the relayer).
 */
export {
  SendService,
  type SendAnswer,
  type SendChain,
  type SendRun,
  type SendServiceOptions,
  type SignChecked,
} from "./send";
export { SendError, SEND_ERROR_CODES, type SendErrorCode } from "./errors";

/**
 * When a send must have its answer on the way back to the action: the run's own limit less a margin
 * (a tenth of it, between 50 ms and 1 s) left for the action to report what happened.
 */
export function sendDeadline(runStartedAt: number, wallTimeMs: number): number {
  const margin = Math.min(1000, Math.max(50, wallTimeMs / 10));
  return runStartedAt + wallTimeMs - margin;
}
