/**
 * What `npm start` prints once it is up (scripts/start/banner.ts): first start versus restart, the CLI
 * hint for a non-default URL, and the dev root key box.
 */
import { expect } from "chai";
import { banner, devRootKeyWarning } from "../../scripts/start/banner";
import { loadConfig } from "../../scripts/start/config";

const config = loadConfig({ SIGIL_DATA_DIR: "/tmp/sigil-banner-test" }, "/tmp");
const facts = {
  url: "http://127.0.0.1:8000",
  chainId: 31337,
  rpcUrl: "http://127.0.0.1:8545",
  embeddedChain: true,
  deployment: {
    registry: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
    forwarder: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    deployBlock: 1,
  },
  freshDeployment: true,
  paymentProcessor: "simulated" as const,
};

describe("start: the banner", () => {
  it("on a first start marks the registry as deployed now and suggests creating an account", () => {
    const out = banner(config, facts);
    expect(out).to.contain("registry     0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512  (deployed now)");
    expect(out).to.contain("or create an account in another terminal:");
    expect(out).not.to.contain("Resumed");
  });

  it("on a restart says the state is back before offering a new account", () => {
    const out = banner(config, { ...facts, freshDeployment: false });
    expect(out).not.to.contain("(deployed now)");
    expect(out).not.to.contain("Next: ");
    expect(out).to.contain(
      "Resumed: every account, key, group, PKP and balance in the data folder is as you left it.",
    );
    expect(out).to.contain(
      "New here? Open http://127.0.0.1:8000/ in a browser, or create an account in another terminal:",
    );
  });

  it("prints the dashboard's URL, the API's own origin", () => {
    expect(banner(config, facts)).to.contain(
      "\n  dashboard    http://127.0.0.1:8000/  (open it in a browser: the whole walk-through, no terminal needed)\n",
    );
  });

  it("exports SIGIL_URL before the CLI hint, as README.md does, when the API is not on the CLI's default URL", () => {
    expect(banner(config, facts)).to.contain('\n\n  npx sigil account create --name "my first account"\n');
    expect(banner(config, facts)).not.to.contain("SIGIL_URL");
    expect(banner(config, { ...facts, url: "http://127.0.0.1:8123" })).to.contain(
      '\n  export SIGIL_URL=http://127.0.0.1:8123\n  npx sigil account create --name "my first account"\n',
    );
  });

  it("offers the dashboard as the first step", () => {
    expect(banner(config, facts)).to.contain(
      "Next: open http://127.0.0.1:8000/ in a browser, or create an account in another terminal:",
    );
  });

  it("the dev root key box names the key file once, on its own line, without repeating the enclave's sentence", () => {
    const box = devRootKeyWarning(
      "enclave: DEV MODE generated a new root key at /data/.sigil/root.key (mode 0600). Do not use dev mode in production.",
    );
    const lines = box.trimEnd().split("\n");
    expect(lines[1]).to.equal("!! DEV MODE: a new root key was generated for this data folder:");
    expect(lines[2]).to.equal("!!   /data/.sigil/root.key");
    expect(box.match(/DEV MODE/g)).to.have.length(1);
    expect(box).not.to.contain("enclave:");
  });

  it("the dev root key box still shows the enclave's notice whole if it names no file", () => {
    const box = devRootKeyWarning("enclave: DEV MODE root key created");
    expect(box).to.contain("!!   enclave: DEV MODE root key created\n");
  });
});
