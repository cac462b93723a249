/**
 * Optional anchoring of audit checkpoints on chain (docs/audit-log.md, "Anchoring"; off by default):
 * every `every`-th signed checkpoint of an account is sent to the AuditAnchor contract
 * (contracts/AuditAnchor.sol) by one of the instance's gas wallets, through the same sending pipeline as
 * path-A writes (Sender.sendCall), behind the answers, from the audit sweep. The transaction is then
 * recorded in the checkpoint, which the export carries, so that a verifier can read the event back from
 * the chain (sdk/audit.ts, verifyAuditAnchors). A checkpoint is claimed in the database before it is
 * sent, so instances sharing a database never anchor the same one twice; a send that fails gives the
 * claim back and a later sweep tries again.
 */
import { Interface } from "ethers";
import type { Logger } from "pino";
import type { AuditStore } from "./store";

/** The contract's one function (contracts/AuditAnchor.sol). */
const ANCHOR_ABI = new Interface(["function anchor(uint256 accountId, uint64 sequence, bytes32 headHash)"]);

/** Above the ~24,100 gas an anchor uses (test/contracts/auditAnchor.test.ts), with room to spare. */
const ANCHOR_GAS_LIMIT = 60_000n;

export interface AnchorOptions {
  /** The AuditAnchor contract's address. */
  contract: string;
  /** Anchor every this many checkpoints of an account (default 1: each). */
  every?: number;
}

export interface AnchorSender {
  sendCall(to: string, data: string, gasLimit: bigint): Promise<{ txHash: string; blockNumber: number }>;
}

export class AuditAnchorer {
  constructor(
    private readonly store: AuditStore,
    private readonly sender: AnchorSender,
    private readonly o: AnchorOptions & { chainId: number; instance: string; logger: Logger },
  ) {}

  /** Anchors every checkpoint due now; answers how many were anchored. */
  async anchorDue(): Promise<number> {
    const due = await this.store.claimAnchors(Math.max(1, this.o.every ?? 1), this.o.instance);
    let anchored = 0;
    for (const c of due) {
      try {
        const data = ANCHOR_ABI.encodeFunctionData("anchor", [BigInt(c.account), BigInt(c.seq), c.head_hash]);
        const mined = await this.sender.sendCall(this.o.contract, data, ANCHOR_GAS_LIMIT);
        await this.store.recordAnchor(c.account, c.seq, {
          chain_id: this.o.chainId,
          contract: this.o.contract.toLowerCase(),
          tx_hash: mined.txHash.toLowerCase(),
          block_number: mined.blockNumber,
        });
        anchored++;
      } catch (err) {
        await this.store.recordAnchor(c.account, c.seq, null).catch(() => undefined);
        this.o.logger.warn(
          { err: (err as Error).message, account: c.account, seq: c.seq },
          "audit: anchoring a checkpoint failed; retried later",
        );
      }
    }
    return anchored;
  }
}
