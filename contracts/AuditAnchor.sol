// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/**
 * @title AuditAnchor
 * @notice Optional public timestamps for Sigil's audit-log checkpoints (docs/audit-log.md, "Anchoring").
 * A relayer that anchors emits one `AuditCheckpointAnchored` per anchored checkpoint: the account, the
 * checkpoint's sequence and the head hash the enclave's identity key signed. The event proves that this
 * head existed no later than its block, so an operator cannot later replace the chain up to it, even
 * with the identity key. It holds no state and no access control: anyone may emit an anchor, and a
 * verifier checks the one transaction a checkpoint names, from this contract, for exactly its values.
 * Kept apart from the registry so that the registry's code, gas and coverage are untouched.
 */
contract AuditAnchor {
    /// @notice An anchor names no entry: sequence 0 or a zero head hash.
    error EmptyCheckpoint();

    /// @notice The head of `accountId`'s audit chain at `sequence` was `headHash` (a signed checkpoint's).
    /// @param accountId The Sigil account whose audit log it is.
    /// @param sequence The checkpoint's sequence (the last entry it covers).
    /// @param headHash The SHA-256 hash of that entry, as the checkpoint states it.
    event AuditCheckpointAnchored(uint256 indexed accountId, uint64 indexed sequence, bytes32 headHash);

    /// @notice Emits `AuditCheckpointAnchored` for a checkpoint.
    /// @param accountId The Sigil account whose audit log it is.
    /// @param sequence The checkpoint's sequence; not 0.
    /// @param headHash The checkpoint's head hash; not zero.
    function anchor(uint256 accountId, uint64 sequence, bytes32 headHash) external {
        if (sequence == 0 || headHash == bytes32(0)) revert EmptyCheckpoint();
        emit AuditCheckpointAnchored(accountId, sequence, headHash);
    }
}
