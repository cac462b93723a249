// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC2771Forwarder} from "@openzeppelin/contracts/metatx/ERC2771Forwarder.sol";

/**
 * @title SigilForwarder
 * @notice OpenZeppelin's ERC-2771 forwarder, deployed once per registry (path A). The relayer submits
 * `execute(request)` with a request signed by the principal (an API key or the service-managed owner); the
 * registry then sees the signer as `_msgSender()`. EIP-712 domain: name "SigilForwarder", version "1".
 */
contract SigilForwarder is ERC2771Forwarder {
    constructor() ERC2771Forwarder("SigilForwarder") {}
}
