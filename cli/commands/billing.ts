import type { Command } from "commander";
import { UsageError } from "../api";
import { contextOf } from "../context";
import { fields, table, when } from "../output";

export function registerBilling(program: Command): void {
  const billing = program.command("billing").description("credits: balance, top-up, history");

  billing
    .command("balance")
    .description("the account's credit balance")
    .action(async (_o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ balance_cents: number; balance_display: string }>(
        "GET",
        "/core/v1/billing/balance",
      );
      out.result(r, () => `${r.balance_display} (${r.balance_cents} cents)`);
    });

  billing
    .command("top-up")
    .description(
      "buy credits: completed on the spot with the simulated processor, or a Stripe payment to finish in a browser",
    )
    .option("--amount <cents>", "amount in cents (minimum 500)", "500")
    .action(async (o: { amount: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      if (!/^\d+$/.test(o.amount))
        throw new UsageError(`--amount must be a whole number of cents, e.g. 500.`);
      const { publishable_key, mode } = await client.request<{ publishable_key: string; mode?: string }>(
        "GET",
        "/core/v1/billing/stripe_config",
        { auth: false },
      );
      const simulated = mode === "simulated" || (mode === undefined && publishable_key.startsWith("pk_sim_"));
      const intent = await client.request<{ payment_intent_id: string; client_secret: string }>(
        "POST",
        "/core/v1/billing/create_payment_intent",
        { body: { amount_cents: Number(o.amount) } },
      );
      if (!simulated) {
        // Real Stripe: the card or wallet step happens in the browser; the CLI cannot and must not see card data.
        const r = { status: "requires_payment", ...intent, publishable_key };
        out.result(r, () =>
          [
            fields([
              ["payment intent", intent.payment_intent_id],
              ["client secret", intent.client_secret],
              ["publishable key", publishable_key],
            ]),
            "",
            "Complete the payment with Stripe.js (stripe.confirmPayment with this client secret and publishable key),",
            "then credit it:",
            "",
            `  npx sigil billing confirm ${intent.payment_intent_id}`,
          ].join("\n"),
        );
        return;
      }
      // Simulated processor: play the customer's part through its dev-only endpoint, then confirm like a client would.
      await client.request(
        "POST",
        `/core/v1/billing/simulated/intents/${encodeURIComponent(intent.payment_intent_id)}/succeed`,
      );
      const r = await out.progress(
        "confirming the payment",
        client.request<Record<string, unknown>>("POST", "/core/v1/billing/confirm_payment", {
          body: { payment_intent_id: intent.payment_intent_id },
        }),
      );
      out.result({ payment_intent_id: intent.payment_intent_id, ...r }, () =>
        fields([
          ["payment intent", intent.payment_intent_id],
          ["status", r.status],
          ["credited", r.credited_cents !== undefined ? `${String(r.credited_cents)} cents` : undefined],
          ["balance", r.balance_display ?? r.balance_cents],
        ]),
      );
    });

  billing
    .command("confirm <paymentIntentId>")
    .description("credit a payment once the processor reports it settled")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<Record<string, unknown>>("POST", "/core/v1/billing/confirm_payment", {
        body: { payment_intent_id: id },
      });
      out.result(r, () => fields(Object.entries(r).map(([k, v]) => [k.replace(/_/g, " "), v])));
    });

  billing
    .command("history")
    .description("ledger entries, newest first")
    .option("--page <n>", "page number, from 0", "0")
    .option("--page-size <n>", "items per page (1..100)", "20")
    .action(async (o: { page: string; pageSize: string }, cmd: Command) => {
      const { client, out } = contextOf(cmd);
      const r = await client.request<{ items: Record<string, unknown>[] }>(
        "GET",
        "/core/v1/billing/history",
        {
          query: { page_number: o.page, page_size: o.pageSize },
        },
      );
      out.result(r, () =>
        table(
          ["time", "kind", "cents", "operation", "reference"],
          (r.items ?? []).map((e) => [
            when(e.created_at ?? e.time),
            String(e.kind ?? e.type ?? ""),
            String(e.amount_cents ?? ""),
            String(e.operation ?? ""),
            String(e.reference ?? ""),
          ]),
        ),
      );
    });
}
