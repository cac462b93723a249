// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IAccountRegistry} from "../interfaces/IAccountRegistry.sol";

/**
 * @title ScopeMasks
 * @notice The per-group half of a usage key's permissions: one storage word per (key, group id) holding a
 * 4-bit mask (EXECUTE, MANAGE_ACTIONS, ADD_PKP, REMOVE_PKP) and the scope epoch it was written under. Group
 * id 0 is the wildcard: a bit set on id 0 applies to every live group of the key's account.
 * @dev A word counts only while its epoch equals the key's current epoch. Every addKey/updateKey takes a
 * fresh epoch from a registry-wide counter that never repeats, so replacing a key's scopes never needs to
 * find and clear the old words: they stop counting. That is what makes one packed slot per (key, group)
 * enough, without an enumerable set of ids per key. Validation of the ids (0 or a live group) is the
 * registry's job because it needs the group state.
 */
library ScopeMasks {
    /// @notice Mask bit of the execute scope.
    uint8 internal constant EXECUTE = 1;
    /// @notice Mask bit of the group:manageActions scope.
    uint8 internal constant MANAGE_ACTIONS = 2;
    /// @notice Mask bit of the group:addPkp scope.
    uint8 internal constant ADD_PKP = 4;
    /// @notice Mask bit of the group:removePkp scope.
    uint8 internal constant REMOVE_PKP = 8;
    /// @notice The group id that stands for every group of the account.
    uint64 internal constant WILDCARD = 0;

    /**
     * @notice The mask bit of a per-group scope.
     * @dev Relies on the enum order of `IAccountRegistry.Scope`: the three account-wide scopes come first, then
     * Execute, ManageActions, AddPkp, RemovePkp, which map to bits 1, 2, 4, 8. Callers answer account-wide scopes
     * from the key's flags before asking; an account-wide scope here reverts (arithmetic underflow).
     */
    function bitOf(IAccountRegistry.Scope scope) internal pure returns (uint8) {
        return uint8(1 << (uint8(scope) - uint8(IAccountRegistry.Scope.Execute)));
    }

    /// @notice The bits of a stored word for a key whose current epoch is `epoch` (none if written earlier).
    function bitsAt(uint256 word, uint64 epoch) internal pure returns (uint8) {
        return word >> 8 == epoch ? uint8(word) : 0;
    }

    /// @notice `word` with `bit` granted under `epoch`: bits of an older epoch are dropped first.
    function granted(uint256 word, uint64 epoch, uint8 bit) internal pure returns (uint256) {
        if (word >> 8 != epoch) word = uint256(epoch) << 8;
        return word | bit;
    }
}
