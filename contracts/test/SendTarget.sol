// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/**
 * Test-only: the target of `Actions.sendTransaction`'s tests: a call that lands and logs, and calls
 * that revert with each kind of reason the send decodes (Error(string), Panic(uint256), a custom error).
 */
contract SendTarget {
    error NotAllowed(address caller, uint256 code);

    event Stored(address indexed from, uint256 value);

    uint256 public stored;

    function store(uint256 value) external payable {
        stored = value;
        emit Stored(msg.sender, value);
    }

    function failWithReason() external pure {
        revert("SendTarget: refused");
    }

    function failWithPanic(uint256 d) external pure returns (uint256) {
        return 1 / d;
    }

    function failWithCustom() external view {
        revert NotAllowed(msg.sender, 7);
    }
}
