/** "$12.34" for 1234 cents; "-$0.05" for -5. Integer cents in, no floating point anywhere. */
export function formatCents(cents: number): string {
  const sign = cents < 0 ? "-" : "";
  const abs = Math.abs(cents);
  const dollars = Math.floor(abs / 100)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${sign}$${dollars}.${String(abs % 100).padStart(2, "0")}`;
}

/** Credit packages: 1 credit = 1 cent, Starter equals the 500-cent minimum. */
export const CREDIT_PACKAGES = Object.freeze([
  { id: "starter", name: "Starter", amount_cents: 500 },
  { id: "basic", name: "Basic", amount_cents: 1000 },
  { id: "standard", name: "Standard", amount_cents: 2500 },
  { id: "pro", name: "Pro", amount_cents: 5000 },
]);
