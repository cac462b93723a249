/**
 * `npx hardhat run scripts/gas/forwarderFloor.ts`: what path A costs on its own, whatever the write.
 * A forwarded call to a function that does nothing (contracts/test/NoopTarget.sol) through
 * SigilForwarder.execute, and through executeBatch of 8, against the same call sent directly; the
 * difference is the forwarder's fixed cost per write (signature and request calldata, EIP-712 hashing,
 * ecrecover, the signer's nonce, the extra CALL, ExecutedForwardRequest). Steady state: every signer has
 * used the forwarder before (its nonce slot is non-zero), as in `npm run gas`.
 * docs/contracts.md ("Path A's floor") uses these figures to decide what a leaner forwarder could reach.
 */
import { ethers } from "hardhat";
import { Wallet, type TransactionReceipt } from "ethers";
import { NoopTarget__factory, SigilForwarder__factory } from "../../typechain-types";
import { BATCH_SIZE } from "./scenarios";
import { FORWARD_REQUEST_TYPES } from "../../enclave";

/** Calldata gas of a transaction's input (EIP-2028: 4 per zero byte, 16 per other byte). */
export function calldataGas(data: string): number {
  const bytes = ethers.getBytes(data);
  return bytes.reduce((sum, b) => sum + (b === 0 ? 4 : 16), 0);
}

async function main(): Promise<void> {
  const [deployer, relayer, directCaller] = await ethers.getSigners();
  const forwarder = await new SigilForwarder__factory(deployer).deploy();
  const target = await new NoopTarget__factory(deployer).deploy(await forwarder.getAddress());
  const domain = {
    name: "SigilForwarder",
    version: "1",
    chainId: (await ethers.provider.getNetwork()).chainId,
    verifyingContract: await forwarder.getAddress(),
  };
  const data = target.interface.encodeFunctionData("noop");
  const signers = Array.from({ length: BATCH_SIZE }, (_, i) => new Wallet(ethers.id(`forwarder floor ${i}`)));
  const signed = async (signer: Wallet) => {
    const request = {
      from: signer.address,
      to: await target.getAddress(),
      value: 0n,
      gas: 100_000n,
      nonce: await forwarder.nonces(signer.address),
      deadline: 2n ** 40n,
      data,
    };
    return { ...request, signature: await signer.signTypedData(domain, FORWARD_REQUEST_TYPES, request) };
  };
  const landed = async (tx: { wait(): Promise<TransactionReceipt | null> }) => (await tx.wait())!;

  const rows: [string, number, number][] = [];
  const direct = async () => {
    const tx = await directCaller.sendTransaction({ to: await target.getAddress(), data });
    const receipt = await landed(tx);
    return [Number(receipt.gasUsed), calldataGas(tx.data)] as const;
  };
  await direct();
  const [directGas, directCalldata] = await direct();
  rows.push(["direct call", directGas, directCalldata]);

  const single = async () => {
    const tx = await forwarder.connect(relayer).execute(await signed(signers[0]));
    return [Number((await landed(tx)).gasUsed), calldataGas(tx.data)] as const;
  };
  const [firstGas, firstCalldata] = await single();
  rows.push(["execute, signer's first request", firstGas, firstCalldata]);
  const [singleGas, singleCalldata] = await single();
  rows.push(["execute, steady state", singleGas, singleCalldata]);

  const batch = async () => {
    const requests = [];
    for (const s of signers) requests.push(await signed(s));
    const tx = await forwarder.connect(relayer).executeBatch(requests, ethers.ZeroAddress);
    return [Number((await landed(tx)).gasUsed) / BATCH_SIZE, calldataGas(tx.data) / BATCH_SIZE] as const;
  };
  await batch();
  const [batchGas, batchCalldata] = await batch();
  rows.push([`executeBatch of ${BATCH_SIZE}, per request`, batchGas, batchCalldata]);

  console.log("| Call to a no-op function | Receipt gas | of which calldata | Over the direct call |");
  console.log("| --- | ---: | ---: | ---: |");
  for (const [label, gas, calldata] of rows) {
    const over = label === "direct call" ? "" : String(Math.round(gas - directGas));
    console.log(`| ${label} | ${Math.round(gas)} | ${Math.round(calldata)} | ${over} |`);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
