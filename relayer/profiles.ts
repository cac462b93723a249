/**
 * The off-chain account profile (description, e-mail): personal data stays off chain. In the data layer
 * (migration 12), so on PostgreSQL every instance answers the same profile.
 */
import { type DataLayer, prepare } from "./db";

export interface AccountProfile {
  description: string;
  email: string | null;
  createdMs: number;
}

const Q = {
  put: prepare("profiles.put", (db, a) =>
    db
      .insertInto("account_profile")
      .values({ account_id: a(0), description: a(1), email: a(2), created_ms: a(3) })
      .onConflict((oc) =>
        oc.column("account_id").doUpdateSet({ description: a(1), email: a(2), created_ms: a(3) }),
      ),
  ),
  get: prepare("profiles.get", (db, a) =>
    db
      .selectFrom("account_profile")
      .select(["description", "email", "created_ms"])
      .where("account_id", "=", a(0)),
  ),
};

export class ProfileStore {
  constructor(private readonly db: DataLayer) {}

  async put(accountId: string, p: AccountProfile): Promise<void> {
    await this.db.run(Q.put, [accountId, p.description, p.email, p.createdMs]);
  }

  async get(accountId: string): Promise<AccountProfile | undefined> {
    const row = await this.db.first(Q.get, [accountId]);
    return row && { description: row.description, email: row.email, createdMs: Number(row.created_ms) };
  }
}
