// Billing amounts are integers in micro-units of the billing currency (the API names no currency code).

/** 1234567 micro → "1.23"; keeps 2 decimals, more when the amount is under one unit. */
export function formatMicro(micro: number): string {
  const units = micro / 1_000_000;
  const digits = Math.abs(units) > 0 && Math.abs(units) < 1 ? 4 : 2;
  return units.toLocaleString("en", { minimumFractionDigits: 2, maximumFractionDigits: digits });
}
