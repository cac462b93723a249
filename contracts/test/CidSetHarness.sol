// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {CidSet} from "../libraries/CidSet.sol";

/**
 * Test-only: one CidSet in storage with every library function exposed (test/contracts/CidSet.test.ts).
 * `add` and `remove` take the word as the registry does and do not write it; `addAndStore` and
 * `removeAndStore` write the answered word back unless refused, as the registry's callers do.
 */
contract CidSetHarness {
    using CidSet for CidSet.Set;

    CidSet.Set private _set;

    function refused() external pure returns (uint256) {
        return CidSet.REFUSED;
    }

    function noCidYet() external pure returns (uint256) {
        return CidSet.NO_CID_YET;
    }

    function add(uint256 word, bytes32 cidHash, uint256 max) external returns (uint256) {
        return _set.add(word, cidHash, max);
    }

    function remove(uint256 word, bytes32 cidHash) external returns (uint256) {
        return _set.remove(word, cidHash);
    }

    function addAndStore(bytes32 cidHash, uint256 max) external returns (uint256 next) {
        next = _set.add(_set.word, cidHash, max);
        if (next != CidSet.REFUSED) _set.word = next;
    }

    function removeAndStore(bytes32 cidHash) external returns (uint256 next) {
        next = _set.remove(_set.word, cidHash);
        if (next != CidSet.REFUSED) _set.word = next;
    }

    function setWord(uint256 word) external {
        _set.word = word;
    }

    function clear() external {
        _set.clear();
    }

    function word() external view returns (uint256) {
        return _set.word;
    }

    function contains(bytes32 cidHash) external view returns (bool) {
        return _set.contains(cidHash);
    }

    function count() external view returns (uint256) {
        return _set.count();
    }

    function sizeOf(uint256 word_) external pure returns (uint256) {
        return CidSet.sizeOf(word_);
    }
}
