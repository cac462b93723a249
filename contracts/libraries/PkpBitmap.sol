// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/**
 * @title PkpBitmap
 * @notice A group's PKPs as a bitmap over their per-account index (from 1), with the member count and a
 * deletion mark in a 16-bit header at the bottom of word 0.
 * @dev Layout: the low 15 bits of word 0 hold the count (so at most 32,767 members), bit 15 the deletion
 * mark, and the member with index i is bit p % 256 of word p / 256, with p = i + HEADER_BITS - 1. So word 0
 * holds the count beside the bits of indices 1..240: adding or removing one of those writes a single slot,
 * and removing the last member clears that slot to zero (a storage refund). Members past index 240 cost a
 * second write, for the count.
 *
 * Writes answer whether they happened instead of reverting: the refusals are the caller's errors, named with
 * ids this library does not know, and a bool is the cheapest answer on the path that succeeds. A refused
 * write changes nothing; the caller tells the reasons apart on its failure path (`count`, `isDeleted`).
 */
library PkpBitmap {
    struct Bitmap {
        mapping(uint256 wordIndex => uint256 bits) words;
    }

    /// @notice Bits of word 0 below the first member bit: the count and the deletion mark.
    uint256 internal constant HEADER_BITS = 16;
    uint256 private constant COUNT_MASK = (1 << 15) - 1;
    uint256 private constant DELETED = 1 << 15;

    /**
     * @notice Makes `index` (≥ 1) a member; false (nothing written) when the bitmap holds `max` (≤ 32,767)
     * members already or `index` is one.
     */
    function add(Bitmap storage self, uint256 index, uint256 max) internal returns (bool) {
        uint256 head = self.words[0];
        if (head & COUNT_MASK >= max) return false;
        (uint256 wordIndex, uint256 bit) = bitOf(index);
        if (wordIndex == 0) {
            if (head & bit != 0) return false;
            // The count is below `max`, so adding one stays inside its bits (and cannot wrap).
            unchecked {
                self.words[0] = (head | bit) + 1;
            }
        } else {
            uint256 word = self.words[wordIndex];
            if (word & bit != 0) return false;
            self.words[wordIndex] = word | bit;
            unchecked {
                self.words[0] = head + 1;
            }
        }
        return true;
    }

    /**
     * @notice Removes the member `index` (≥ 1); false (nothing written) when the bitmap is marked deleted or
     * `index` is no member.
     * @dev The deletion mark is checked first: a caller that skips its own liveness check when the member is
     * found relies on it (a bit can only have been set while the group was live).
     */
    function remove(Bitmap storage self, uint256 index) internal returns (bool) {
        (uint256 wordIndex, uint256 bit) = bitOf(index);
        uint256 head = self.words[0];
        if (head & DELETED != 0) return false;
        // A member is found below, so the count is at least one: subtracting one stays inside its bits.
        if (wordIndex == 0) {
            if (head & bit == 0) return false;
            unchecked {
                self.words[0] = (head & ~bit) - 1;
            }
        } else {
            uint256 word = self.words[wordIndex];
            if (word & bit == 0) return false;
            self.words[wordIndex] = word & ~bit;
            unchecked {
                self.words[0] = head - 1;
            }
        }
        return true;
    }

    /**
     * @notice Marks a bitmap that still holds members as deleted, so `remove` refuses from now on. An empty
     * bitmap is left as is: it has no member for `remove` to find, and it stays free of a write.
     */
    function markDeleted(Bitmap storage self) internal {
        uint256 head = self.words[0];
        if (head != 0) self.words[0] = head | DELETED;
    }

    /// @notice Whether `markDeleted` marked the bitmap (only a bitmap holding members can be marked).
    function isDeleted(Bitmap storage self) internal view returns (bool) {
        return self.words[0] & DELETED != 0;
    }

    /// @notice Whether `index` (≥ 1) is a member (the deletion mark is not consulted).
    function contains(Bitmap storage self, uint256 index) internal view returns (bool) {
        (uint256 wordIndex, uint256 bit) = bitOf(index);
        return self.words[wordIndex] & bit != 0;
    }

    /// @notice The number of members.
    function count(Bitmap storage self) internal view returns (uint256) {
        return self.words[0] & COUNT_MASK;
    }

    /// @notice Where the bit of `index` (≥ 1) sits: its word and the bit's mask in that word.
    function bitOf(uint256 index) internal pure returns (uint256 wordIndex, uint256 bit) {
        // Indices come from a 32-bit counter: the sum cannot wrap.
        unchecked {
            uint256 position = index + HEADER_BITS - 1;
            return (position >> 8, 1 << (position & 255));
        }
    }
}
