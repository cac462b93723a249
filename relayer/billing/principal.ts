/**
 * Who is charged: the account, and the key that acted for it. In a module of its own so that the
 * reservations (which record it) and metering (which charges it) both import it without importing each
 * other: metering uses the reservations, and reservations importing this type from metering was a cycle.
 */
export interface Principal {
  accountId: string /* decimal */;
  keyAddress: string;
  kind: "account" | "usage";
}
