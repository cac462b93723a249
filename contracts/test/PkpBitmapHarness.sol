// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {PkpBitmap} from "../libraries/PkpBitmap.sol";

/**
 * Test-only: one PkpBitmap in storage, every library function exposed, and the raw words, so the tests
 * (test/contracts/PkpBitmap.test.ts) can check the layout as well as the behaviour.
 */
contract PkpBitmapHarness {
    using PkpBitmap for PkpBitmap.Bitmap;

    PkpBitmap.Bitmap private _bitmap;

    function add(uint256 index, uint256 max) external returns (bool) {
        return _bitmap.add(index, max);
    }

    function remove(uint256 index) external returns (bool) {
        return _bitmap.remove(index);
    }

    function markDeleted() external {
        _bitmap.markDeleted();
    }

    function isDeleted() external view returns (bool) {
        return _bitmap.isDeleted();
    }

    function contains(uint256 index) external view returns (bool) {
        return _bitmap.contains(index);
    }

    function count() external view returns (uint256) {
        return _bitmap.count();
    }

    function bitOf(uint256 index) external pure returns (uint256 wordIndex, uint256 bit) {
        return PkpBitmap.bitOf(index);
    }

    function wordAt(uint256 wordIndex) external view returns (uint256) {
        return _bitmap.words[wordIndex];
    }
}
