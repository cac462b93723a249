// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/**
 * @title CidSet
 * @notice A group's action CIDs as a set of hashes, with its size in a count word beside it.
 * @dev `word` holds the count in its low 16 bits, plus NO_CID_YET from the set's creation (its creator writes it) until
 * its first CID. So the word is non-zero from creation until the set loses its last CID (removing it clears
 * the word: a storage refund), and the first `add` writes a slot that is already paid for. A caller can
 * therefore read a non-zero word as "this set exists", and `clear` it when the set goes away.
 *
 * `add` and `remove` take the word and answer the new one without writing it, so a batch writes it once. They
 * answer REFUSED instead of reverting: the refusals are the caller's errors, named with ids this library does
 * not know, and one word is the cheapest answer on the path that succeeds. A refused write changes nothing;
 * the caller tells the reasons apart on its failure path (`sizeOf`, `contains`).
 */
library CidSet {
    struct Set {
        uint256 word;
        mapping(bytes32 cidHash => uint256 listed) listed;
    }

    uint256 private constant COUNT_MASK = (1 << 16) - 1;
    /// @notice What `add` and `remove` answer when they change nothing (no word can take this value).
    uint256 internal constant REFUSED = type(uint256).max;
    /// @notice The word of a set created without CIDs (see the library's notes).
    uint256 internal constant NO_CID_YET = 1 << 16;

    /**
     * @notice Lists `cidHash` in a set whose current word is `word`; answers the new word (NO_CID_YET
     * dropped), or REFUSED when the set holds `max` (< 65,536) CIDs already or lists `cidHash`.
     */
    function add(Set storage self, uint256 word, bytes32 cidHash, uint256 max) internal returns (uint256) {
        uint256 size = word & COUNT_MASK;
        if (size >= max || self.listed[cidHash] != 0) return REFUSED;
        self.listed[cidHash] = 1;
        // Below `max`, so no wrap.
        unchecked {
            return size + 1;
        }
    }

    /**
     * @notice Removes `cidHash` from a set whose current word is `word`; answers the new word, or REFUSED
     * when it is not listed. A zero word (no CID at all) is refused without reading the CID's slot.
     */
    function remove(Set storage self, uint256 word, bytes32 cidHash) internal returns (uint256) {
        if (word == 0 || self.listed[cidHash] == 0) return REFUSED;
        self.listed[cidHash] = 0;
        // A listed CID means a count of at least one and no NO_CID_YET (its add cleared it).
        unchecked {
            return word - 1;
        }
    }

    /// @notice Zeroes the word: the set no longer counts as existing. Listed hashes stay in storage.
    function clear(Set storage self) internal {
        delete self.word;
    }

    /// @notice Whether `cidHash` is listed.
    function contains(Set storage self, bytes32 cidHash) internal view returns (bool) {
        return self.listed[cidHash] != 0;
    }

    /// @notice The number of CIDs listed.
    function count(Set storage self) internal view returns (uint256) {
        return sizeOf(self.word);
    }

    /// @notice The number of CIDs a set whose word is `word` lists.
    function sizeOf(uint256 word) internal pure returns (uint256) {
        return word & COUNT_MASK;
    }
}
