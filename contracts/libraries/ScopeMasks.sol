// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {EnumerableSet} from "@openzeppelin/contracts/utils/structs/EnumerableSet.sol";
import {IAccountRegistry} from "../interfaces/IAccountRegistry.sol";

/**
 * @title ScopeMasks
 * @notice The per-group half of a usage key's permissions (DESIGN.md section 3): the set of group ids the key
 * is scoped on, and a 4-bit mask per group id (EXECUTE, MANAGE_ACTIONS, ADD_PKP, REMOVE_PKP). Group id 0 is the
 * wildcard: a bit set on id 0 applies to every group of the key's account.
 * @dev The id set makes the masks enumerable, so `clear` can wipe them entirely (updateKey is a full replace)
 * and views can rebuild the four arrays of `KeyScopes`. Validation of the ids (0 or a live group) is the
 * caller's job because it needs the registry's group state.
 */
library ScopeMasks {
    using EnumerableSet for EnumerableSet.UintSet;

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

    /// @notice The masks of one key.
    struct Masks {
        EnumerableSet.UintSet groupIds;
        mapping(uint64 groupId => uint8 bits) bits;
    }

    /**
     * @notice The mask bit of a per-group scope.
     * @dev Relies on the enum order of `IAccountRegistry.Scope`: the three account-wide scopes come first, then
     * Execute, ManageActions, AddPkp, RemovePkp, which map to bits 1, 2, 4, 8. Callers answer account-wide scopes
     * from the key's flags before asking; an account-wide scope here reverts (arithmetic underflow).
     */
    function bitOf(IAccountRegistry.Scope scope) internal pure returns (uint8) {
        return uint8(1 << (uint8(scope) - uint8(IAccountRegistry.Scope.Execute)));
    }

    /// @notice Grant the four per-group scopes of `scopes`. Duplicate ids are harmless.
    function grant(Masks storage self, IAccountRegistry.KeyScopes calldata scopes) internal {
        _grant(self, scopes.executeInGroups, EXECUTE);
        _grant(self, scopes.manageIpfsIdsInGroups, MANAGE_ACTIONS);
        _grant(self, scopes.addPkpToGroups, ADD_PKP);
        _grant(self, scopes.removePkpFromGroups, REMOVE_PKP);
    }

    /// @notice Remove every mask, wildcard included.
    function clear(Masks storage self) internal {
        uint256 count = self.groupIds.length();
        for (uint256 i = 0; i < count; ++i) {
            delete self.bits[uint64(self.groupIds.at(i))];
        }
        self.groupIds.clear();
    }

    /// @notice Whether `bit` is granted on `groupId`, directly or through the wildcard.
    function allows(Masks storage self, uint8 bit, uint64 groupId) internal view returns (bool) {
        return (self.bits[WILDCARD] | self.bits[groupId]) & bit != 0;
    }

    /// @notice Whether `bit` is granted through the wildcard.
    function isWildcard(Masks storage self, uint8 bit) internal view returns (bool) {
        return self.bits[WILDCARD] & bit != 0;
    }

    /// @notice The number of distinct group ids (wildcard included) the key is scoped on.
    function length(Masks storage self) internal view returns (uint256) {
        return self.groupIds.length();
    }

    /// @notice The `index`-th group id and its mask.
    function at(Masks storage self, uint256 index) internal view returns (uint64 groupId, uint8 bits) {
        groupId = uint64(self.groupIds.at(index));
        bits = self.bits[groupId];
    }

    /// @notice The group ids holding `bit`, in the order they were first granted (deduplicated).
    function groupsWith(Masks storage self, uint8 bit) internal view returns (uint64[] memory ids) {
        uint256 total = self.groupIds.length();
        uint64[] memory buffer = new uint64[](total);
        uint256 count = 0;
        for (uint256 i = 0; i < total; ++i) {
            uint64 groupId = uint64(self.groupIds.at(i));
            if (self.bits[groupId] & bit != 0) {
                buffer[count] = groupId;
                ++count;
            }
        }
        ids = new uint64[](count);
        for (uint256 i = 0; i < count; ++i) {
            ids[i] = buffer[i];
        }
    }

    function _grant(Masks storage self, uint64[] calldata groupIds, uint8 bit) private {
        for (uint256 i = 0; i < groupIds.length; ++i) {
            uint64 groupId = groupIds[i];
            self.groupIds.add(groupId);
            self.bits[groupId] |= bit;
        }
    }
}
