// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC2771Context} from "@openzeppelin/contracts/metatx/ERC2771Context.sol";

/**
 * Test-only: an ERC-2771 target that records who `_msgSender()` says called it, so the enclave's tests
 * can check that a forward request it signed, executed by SigilForwarder, runs as the principal.
 */
contract EnclaveTarget is ERC2771Context {
    address public lastSender;
    uint256 public lastValue;

    constructor(address trustedForwarder) ERC2771Context(trustedForwarder) {}

    function record(uint256 value) external {
        lastSender = _msgSender();
        lastValue = value;
    }
}
