/** What `npm start` prints once the service is up, and the dev-only root key warning. No secrets here. */
import type { SigilConfig } from "./config";

interface BannerFacts {
  url: string;
  chainId: number;
  rpcUrl: string;
  embeddedChain: boolean;
  deployment: { registry: string; forwarder: string; deployBlock: number };
  freshDeployment: boolean;
  paymentProcessor: "simulated" | "stripe";
  /** The instance's gas wallets: an operator outside dev mode must fund them. */
  gasWallets?: string[];
}

export function banner(config: SigilConfig, s: BannerFacts): string {
  const chain = s.embeddedChain ? `embedded anvil at ${s.rpcUrl}` : "SIGIL_RPC_URL";
  const lines = [
    "",
    `Sigil is running at ${s.url}`,
    "",
    `  dashboard    ${s.url}/  (open it in a browser: the whole walk-through, no terminal needed)`,
    `  chain        ${s.chainId} (${chain})`,
    `  registry     ${s.deployment.registry}${s.freshDeployment ? "  (deployed now)" : ""}`,
    `  forwarder    ${s.deployment.forwarder}`,
    `  data folder  ${config.dataDir}`,
    ...gasWalletLines(config, s.gasWallets ?? []),
    `  payments     ${s.paymentProcessor === "stripe" ? "Stripe" : "simulated (no money moves)"}`,
    `  mode         ${config.devMode ? `dev (sign-up credit ${config.signupCreditCents} cents)` : "production"}`,
    // Only said when it is not the default, so the file provider's banner reads as it always did.
    ...(config.rootKeyProvider === "dstack"
      ? ["  root key     dstack KMS (in this TDX CVM's memory only; GET /core/v1/attestation has the quote)"]
      : []),
    `  logs         ${config.logFile === "-" ? "stdout" : config.logFile}`,
    "",
    // A restart is not a first visit: say that the state is back before suggesting a new account.
    ...(s.freshDeployment
      ? [`Next: open ${s.url}/ in a browser, or create an account in another terminal:`]
      : [
          "Resumed: every account, key, group, PKP and balance in the data folder is as you left it.",
          `New here? Open ${s.url}/ in a browser, or create an account in another terminal:`,
        ]),
    "",
    // Any non-default URL (PORT, SIGIL_HOST) must reach the CLI too, or its first command fails; exported
    // as README.md does, so every later command of the walk-through gets it as well.
    ...(s.url === "http://127.0.0.1:8000" ? [] : [`  export SIGIL_URL=${s.url}`]),
    `  npx sigil account create --name "my first account"`,
    "",
    "Then follow the walk-through in README.md. Stop with Ctrl-C; npm start again resumes with everything kept.",
    "",
  ];
  return lines.join("\n") + "\n";
}

/** One line per gas wallet (they are few: SIGIL_GAS_WALLETS, default 4), the instance named on the first. */
function gasWalletLines(config: SigilConfig, wallets: string[]): string[] {
  const label = config.instanceId ? ` (instance ${config.instanceId})` : "";
  return wallets.map((w, i) => (i === 0 ? `  gas wallets  ${w}${label}` : `               ${w}`));
}

/**
 * The enclave's one-line notice, made impossible to miss: a generated key is for development only.
 * The box names the file; the enclave's own sentence (which repeats "DEV MODE" and runs past the box) is
 * shown only if its wording ever changes so that the file cannot be found in it.
 */
export function devRootKeyWarning(message: string): string {
  const bar = "!".repeat(78);
  const file = / at (.+?) \(mode 0?600\)/.exec(message)?.[1];
  return [
    bar,
    "!! DEV MODE: a new root key was generated for this data folder:",
    `!!   ${file ?? message}`,
    "!! Every PKP and API key derives from it. It is stored unencrypted on this disk:",
    "!! fine for trying Sigil, never for real keys. In production set SIGIL_ROOT_KEY",
    "!! from a secret manager (or a TEE key service) and leave SIGIL_DEV_MODE off.",
    bar,
    "",
  ].join("\n");
}
