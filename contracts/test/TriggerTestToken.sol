// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/**
 * Test-only: a plain ERC-20 that anyone can mint, so the chain-event trigger tests emit real `Transfer`
 * logs (a mint is a Transfer from the zero address) from a real token contract.
 */
contract TriggerTestToken is ERC20 {
    constructor() ERC20("Trigger Test Token", "TTT") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
