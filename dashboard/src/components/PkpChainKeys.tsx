/**
 * A PKP's keys beyond the EVM, in the PKPs table: its Solana address, Taproot address, Ed25519 public
 * key and BIP-340 (x-only) public key, each shortened with its full value on hover and a copy button.
 * All are public data the API returns with the PKP (solana_address, taproot_address, ed25519_public_key,
 * schnorr_public_key); nothing here derives anything.
 */
import { CopyButton, short } from "./ui";

interface ChainKeys {
  name: string;
  solana_address: string;
  taproot_address: string;
  ed25519_public_key: string;
  schnorr_public_key: string;
}

export function PkpChainKeys({ pkp }: { pkp: ChainKeys }) {
  const who = pkp.name || "PKP";
  const rows: Array<[string, string, string]> = [
    ["Solana", pkp.solana_address, "solana_address"],
    ["Taproot", pkp.taproot_address, "taproot_address"],
    ["Ed25519 key", pkp.ed25519_public_key, "ed25519_public_key"],
    ["Schnorr key", pkp.schnorr_public_key, "schnorr_public_key"],
  ];
  return (
    <dl className="chain-keys">
      {rows.map(([label, value, field]) => (
        <div key={field} data-field={field}>
          <dt>{label}</dt>
          <dd>
            <code title={value}>{short(value)}</code>{" "}
            <CopyButton
              value={value}
              label={`${label} ${label.endsWith("key") ? "" : "address "}of ${who}`}
            />
          </dd>
        </div>
      ))}
    </dl>
  );
}
