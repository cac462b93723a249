// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC2771Context} from "@openzeppelin/contracts/metatx/ERC2771Context.sol";
import {ERC2771Forwarder} from "@openzeppelin/contracts/metatx/ERC2771Forwarder.sol";

/**
 * Test-only: an ERC-2771 target that records who `_msgSender()` says called it, so the enclave's tests
 * can check that a forward request it signed executes as the principal.
 */
contract EnclaveTarget is ERC2771Context {
    address public lastSender;
    uint256 public lastValue;

    event Recorded(address indexed sender, uint256 value);

    constructor(address trustedForwarder) ERC2771Context(trustedForwarder) {}

    function record(uint256 value) external {
        lastSender = _msgSender();
        lastValue = value;
        emit Recorded(lastSender, value);
    }
}

/// Test-only: the same forwarder as contracts/SigilForwarder.sol, for when that contract is absent.
contract EnclaveTestForwarder is ERC2771Forwarder {
    constructor() ERC2771Forwarder("SigilForwarder") {}
}
