/**
 * Chain-event trigger specs as the service checks them at creation (chainEventSpecFrom: the request's
 * fields by readChainEventInput, the start by startBlock; parseEventSpec), how a log's arguments reach the action (EventDecoder), and
 * which eth_getLogs queries a poll makes (planReads). No chain needed: these are the pure rules.
 */
import { expect } from "chai";
import { Interface, getAddress, id as keccakText, zeroPadValue } from "ethers";
import type { ChainEndpoint } from "../../relayer/chains";
import { ApiError } from "../../relayer/errors";
import {
  MAX_BACKFILL_BLOCKS,
  chainEventSpecFrom,
  parseEventSpec,
  readChainEventInput,
  type ChainEventInput,
} from "../../relayer/triggers/chainEvents";
import { EventDecoder, type TriggerLog } from "../../relayer/triggers/chainEvents/decode";
import { planReads, type WatchedTrigger } from "../../relayer/triggers/chainEvents/readPlan";
import type { ChainEventSpec, Trigger } from "../../relayer/triggers/model";
import { TRANSFER } from "./chainEventsKit";

const CHAINS: ChainEndpoint[] = [
  { chainId: 31337, name: "embedded", rpcUrl: "http://127.0.0.1:8545", confirmations: 0 },
  { chainId: 84532, name: "base-sepolia", rpcUrl: "http://127.0.0.1:8546", confirmations: 5 },
];
const TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const ALICE = getAddress("0x70997970c51812dc3a010c7d01b50e20d4b64c79");
const TRANSFER_TOPIC = keccakText("Transfer(address,address,uint256)");
const HEAD = 100_000;

function refusal(fn: () => unknown): { code: string; status: number; details: Record<string, unknown> } {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError) return { code: e.code, status: e.status, details: e.details ?? {} };
    throw e;
  }
  throw new Error("expected a refusal");
}

const from = (input: Partial<ChainEventInput>) =>
  chainEventSpecFrom({ chainId: 31337, address: TOKEN, event: TRANSFER, ...input }, CHAINS, HEAD);

describe("chain-event triggers: the spec, checked at creation", () => {
  it("normalises: lowercase address, topic0 from the signature, address filters padded, start at the head", () => {
    const spec = from({ topics: [null, ALICE] });
    expect(spec).to.deep.equal({
      chainId: 31337,
      address: TOKEN.toLowerCase(),
      event: "event Transfer(address indexed from, address indexed to, uint256 value)",
      topic0: TRANSFER_TOPIC,
      topics: [null, zeroPadValue(ALICE.toLowerCase(), 32)],
      fromBlock: HEAD,
    });
  });

  it("takes the plain signature (same topic0; args left undecoded) and topic0 alone", () => {
    const plain = parseEventSpec("Transfer(address,address,uint256)");
    expect(plain.topic0).to.equal(TRANSFER_TOPIC);
    expect(plain.indexedKnown).to.equal(false);
    expect(parseEventSpec("event " + TRANSFER).indexedKnown).to.equal(true);
    const byTopic = from({ event: undefined, topic0: TRANSFER_TOPIC.toUpperCase().replace("0X", "0x") });
    expect(byTopic.topic0).to.equal(TRANSFER_TOPIC);
    expect(byTopic.event).to.equal(null);
    // Both given: they must agree.
    expect(from({ topic0: TRANSFER_TOPIC }).topic0).to.equal(TRANSFER_TOPIC);
  });

  it("refuses bad addresses", () => {
    // The last: a mixed-case address whose checksum is wrong (one letter's case flipped), most likely a typo.
    const badChecksum = TOKEN.replace("F", "f");
    for (const address of [
      "0x1234",
      "not an address",
      TOKEN + "00",
      "0x" + "00".repeat(20),
      42,
      undefined,
      badChecksum,
    ]) {
      const r = refusal(() => from({ address }));
      expect(r, String(address)).to.deep.include({ code: "invalid_chain_event", status: 400 });
      expect(r.details.field, String(address)).to.equal("address");
    }
  });

  it("refuses a topic0 that is not the event's hash, and a signature that does not parse or is anonymous", () => {
    const approval = keccakText("Approval(address,address,uint256)");
    const r = refusal(() => from({ topic0: approval }));
    expect(r).to.deep.include({ code: "invalid_chain_event", status: 400 });
    expect(r.details).to.deep.equal({ field: "topic0", expected: TRANSFER_TOPIC });
    for (const event of ["Transfer(", "Transfer(addres,uint256)", "", "Ping() anonymous", 7]) {
      const e = refusal(() => from({ event }));
      expect(e.code, String(event)).to.equal("invalid_chain_event");
      expect(e.details.field, String(event)).to.equal("event");
    }
    expect(refusal(() => from({ event: undefined })).details.field).to.equal("event");
  });

  it("refuses more than three topic filters, and filters that are neither topics nor addresses", () => {
    const r = refusal(() => from({ topics: [null, null, null, null] }));
    expect(r).to.deep.include({ code: "invalid_chain_event", status: 400 });
    expect(r.details).to.deep.equal({ field: "topics", given: 4 });
    // A filter is named by its place in the request's list: topics[0] filters the log's topic 1.
    expect(refusal(() => from({ topics: ["0x12"] })).details.field).to.equal("topics[0]");
    expect(refusal(() => from({ topics: [null, ALICE.replace("C", "c")] })).details.field).to.equal(
      "topics[1]",
    );
    expect(refusal(() => from({ topics: "any" })).details.field).to.equal("topics");
  });

  it("refuses a chain the operator did not configure", () => {
    const r = refusal(() => from({ chainId: 1 }));
    expect(r).to.deep.include({ code: "chain_not_configured", status: 400 });
    expect(r.details).to.deep.equal({ chain_id: 1, configured: [31337, 84532] });
    expect(refusal(() => from({ chainId: "31337" })).code).to.equal("invalid_chain_event");
  });

  it("bounds the backfill: at most 50,000 blocks behind the head, not after it", () => {
    expect(from({ fromBlock: HEAD - MAX_BACKFILL_BLOCKS }).fromBlock).to.equal(HEAD - MAX_BACKFILL_BLOCKS);
    const deep = refusal(() => from({ fromBlock: HEAD - MAX_BACKFILL_BLOCKS - 1 }));
    expect(deep).to.deep.include({ code: "backfill_too_deep", status: 400 });
    expect(deep.details).to.deep.equal({ from_block: HEAD - 50_001, head: HEAD, max_blocks: 50_000 });
    expect(refusal(() => from({ fromBlock: HEAD + 2 })).details.field).to.equal("from_block");
    expect(refusal(() => from({ fromBlock: -1 })).details.field).to.equal("from_block");
    expect(refusal(() => from({ fromBlock: 1.5 })).details.field).to.equal("from_block");
  });

  it("names each refused field at its place in a trigger body when read from one", () => {
    const body = (input: Partial<ChainEventInput>) =>
      refusal(() =>
        readChainEventInput(
          { chainId: 31337, address: TOKEN, event: TRANSFER, ...input },
          CHAINS,
          "chain_event.",
        ),
      );
    expect(body({ address: "0x1234" }).details.field).to.equal("chain_event.address");
    expect(body({ event: "Transfer(" }).details.field).to.equal("chain_event.event");
    expect(body({ topics: [null, "0x12"] }).details.field).to.equal("chain_event.topics[1]");
    expect(body({ fromBlock: -1 }).details.field).to.equal("chain_event.from_block");
    // The start is left to the service, which knows the chain's head only then.
    const read = readChainEventInput(
      { chainId: 31337, address: TOKEN, event: TRANSFER },
      CHAINS,
      "chain_event.",
    );
    expect(read.fromBlock).to.equal(null);
  });
});

describe("chain-event triggers: what the action receives as args", () => {
  const SIG =
    "Filled(address indexed maker, string indexed tag, uint256 amount, bytes note, (uint64 id, address to) leg, int8[] deltas)";
  const iface = new Interface(["event " + SIG]);
  const values = [ALICE, "gm", 10n ** 30n, "0xbeef", [7n, ALICE], [-1n, 2n]];
  const encoded = iface.encodeEventLog("Filled", values);
  const log: TriggerLog = {
    address: TOKEN.toLowerCase(),
    topics: encoded.topics,
    data: encoded.data,
    blockNumber: 1,
    blockHash: "0x" + "ab".repeat(32),
    transactionHash: "0x" + "cd".repeat(32),
    logIndex: 0,
  };

  it("decodes by name and position: integers as decimal strings, addresses checksummed, indexed strings as their hash", () => {
    const args = new EventDecoder(SIG).args(log)!;
    const leg = { "0": "7", id: "7", "1": getAddress(ALICE), to: getAddress(ALICE) };
    expect(args).to.deep.equal({
      "0": getAddress(ALICE),
      maker: getAddress(ALICE),
      "1": keccakText("gm"),
      tag: keccakText("gm"),
      "2": (10n ** 30n).toString(),
      amount: (10n ** 30n).toString(),
      "3": "0xbeef",
      note: "0xbeef",
      "4": leg,
      leg,
      "5": ["-1", "2"],
      deltas: ["-1", "2"],
    });
    expect(JSON.parse(JSON.stringify(args))).to.deep.equal(args);
  });

  it("leaves args null without a signature, with a plain one, and for a log that does not fit", () => {
    expect(new EventDecoder(null).args(log)).to.equal(null);
    expect(
      new EventDecoder("Filled(address,string,uint256,bytes,(uint64,address),int8[])").args(log),
    ).to.equal(null);
    expect(new EventDecoder(SIG).args({ ...log, topics: log.topics.slice(0, 2) })).to.equal(null);
  });
});

describe("chain-event triggers: one query per distinct filter", () => {
  const trigger = (id: string, spec: ChainEventSpec, block: number): WatchedTrigger => ({
    trigger: { id } as Trigger,
    spec,
    cursor: { block, blockHash: null },
  });
  const base = chainEventSpecFrom({ chainId: 31337, address: TOKEN, event: TRANSFER }, CHAINS, 10);
  const toAlice = { ...base, topics: [null, zeroPadValue(ALICE.toLowerCase(), 32)] };

  it("triggers on one event at one cursor share a query; the filter keeps their common topics", () => {
    const same = planReads([
      trigger("a", toAlice, 9),
      trigger("b", { ...toAlice, topics: [...toAlice.topics, null] }, 9),
    ]);
    expect(same).to.have.length(1);
    expect(same[0].filter).to.deep.equal({
      address: base.address,
      topics: [base.topic0, null, toAlice.topics[1]],
    });
    const mixed = planReads([trigger("a", toAlice, 9), trigger("b", base, 9)]);
    expect(mixed).to.have.length(1);
    expect(mixed[0].filter.topics).to.deep.equal([base.topic0]);
    expect(mixed[0].members.map((m) => m.trigger.id)).to.deep.equal(["a", "b"]);
  });

  it("a trigger at another cursor (backfilling) or on another contract reads on its own", () => {
    const other = { ...base, address: "0x" + "22".repeat(20) };
    const reads = planReads([trigger("a", base, 9), trigger("b", base, 3), trigger("c", other, 9)]);
    expect(reads.map((r) => [r.after, r.members.map((m) => m.trigger.id)])).to.deep.equal([
      [9, ["a"]],
      [3, ["b"]],
      [9, ["c"]],
    ]);
  });
});
