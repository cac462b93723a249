/** `npm run start:cluster`'s flags and environment, and what its banner prints of the database URL. */
import { expect } from "chai";
import { UsageError, parseClusterFlags } from "../../scripts/cluster/main";
import { clusterBanner, redactDatabaseUrl } from "../../scripts/cluster/banner";

describe("cluster: flags and banner", () => {
  it("defaults: 3 instances, front on 8000, ./.sigil-cluster, chain on 8545", () => {
    expect(parseClusterFlags([], {}, "/srv")).to.deep.equal({
      instances: 3,
      basePort: 8000,
      anvilPort: 8545,
      dataDir: "/srv/.sigil-cluster",
    });
  });

  it("flags win over the environment; both spellings of a flag work", () => {
    const env = { SIGIL_CLUSTER_INSTANCES: "5", SIGIL_CLUSTER_BASE_PORT: "7000", SIGIL_ANVIL_PORT: "0" };
    expect(
      parseClusterFlags(["--instances", "2", "--base-port=9000", "--data-dir", "c"], env, "/srv"),
    ).to.deep.equal({ instances: 2, basePort: 9000, anvilPort: 0, dataDir: "/srv/c" });
    expect(parseClusterFlags([], env, "/srv")).to.include({ instances: 5, basePort: 7000 });
  });

  it("refuses an unknown flag, a missing value and out-of-range numbers, naming them", () => {
    expect(() => parseClusterFlags(["--nodes", "2"], {}, "/")).to.throw(
      UsageError,
      'unknown argument "--nodes"',
    );
    expect(() => parseClusterFlags(["--instances"], {}, "/")).to.throw(
      UsageError,
      "--instances needs a value",
    );
    expect(() => parseClusterFlags(["--instances", "0"], {}, "/")).to.throw(
      UsageError,
      '--instances must be an integer from 1 to 16, got "0"',
    );
    expect(() => parseClusterFlags(["--base-port", "65535"], {}, "/")).to.throw(
      UsageError,
      '--base-port must be an integer from 1 to 65532, got "65535"',
    );
  });

  it("the banner lists every URL and never the database password", () => {
    const url = "postgres://sigil:s3cret-pw@127.0.0.1:5433/sigil";
    expect(redactDatabaseUrl(url)).to.equal("postgres://sigil:***@127.0.0.1:5433/sigil");
    const text = clusterBanner({
      url: "http://127.0.0.1:8000",
      rpcUrl: "http://127.0.0.1:8545",
      chainId: 31337,
      deployment: { registry: "0x1", forwarder: "0x2" },
      freshDeployment: false,
      databaseUrl: url,
      dataDir: "/d",
      instances: [
        { id: "instance-1", url: "http://127.0.0.1:8001", pid: 11 },
        { id: "instance-2", url: "http://127.0.0.1:8002", pid: 12 },
      ],
    });
    for (const u of [
      "http://127.0.0.1:8000",
      "http://127.0.0.1:8001",
      "http://127.0.0.1:8002",
      "http://127.0.0.1:8545",
    ])
      expect(text).to.include(u);
    expect(text).to.not.include("s3cret-pw");
  });
});
