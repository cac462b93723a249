/** What `npm run start:cluster` prints once everything is up: every URL, and what to try. No secrets. */
import * as path from "node:path";

interface ClusterFacts {
  url: string;
  rpcUrl: string;
  chainId: number;
  deployment: { registry: string; forwarder: string };
  freshDeployment: boolean;
  databaseUrl: string;
  dataDir: string;
  instances: ReadonlyArray<{ id: string; url: string; pid: number }>;
}

/** The database URL without its password (it is in <data dir>/postgres/password). */
export function redactDatabaseUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = "***";
  return u.toString();
}

export function clusterBanner(c: ClusterFacts): string {
  const width = Math.max(...c.instances.map((x) => x.id.length));
  return (
    [
      "",
      `Sigil cluster: ${c.instances.length} instance${c.instances.length === 1 ? "" : "s"} behind ${c.url}`,
      "",
      `  front        ${c.url}  (round-robin; the dashboard at ${c.url}/)`,
      ...c.instances.map((x) => `  ${x.id.padEnd(Math.max(width, 11))}  ${x.url}  (pid ${x.pid})`),
      `  chain        ${c.chainId} (embedded anvil at ${c.rpcUrl})`,
      `  registry     ${c.deployment.registry}${c.freshDeployment ? "  (deployed now)" : ""}`,
      `  forwarder    ${c.deployment.forwarder}`,
      `  database     ${redactDatabaseUrl(c.databaseUrl)}`,
      `  data folder  ${c.dataDir}`,
      `  logs         ${path.join(c.dataDir, "instances", "<id>", "sigil.log")}`,
      "",
      "Try it (in another terminal):",
      "",
      `  export SIGIL_URL=${c.url}`,
      '  npx sigil account create --name "my first account"',
      "",
      "Every instance serves every request; stop one (kill <pid>) and the front routes around it.",
      "Stop everything with Ctrl-C; npm run start:cluster again resumes with everything kept.",
      "",
    ].join("\n") + "\n"
  );
}
