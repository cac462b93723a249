// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC2771Context} from "@openzeppelin/contracts/metatx/ERC2771Context.sol";

/**
 * Test-only: an ERC-2771 target whose one function does nothing, so the gas harness can measure what the
 * forwarder itself costs (scripts/gas/forwarderFloor.ts): a forwarded call to `noop` minus a direct one.
 */
contract NoopTarget is ERC2771Context {
    constructor(address trustedForwarder) ERC2771Context(trustedForwarder) {}

    function noop() external view {
        _msgSender();
    }
}
