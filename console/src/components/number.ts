// Numbers from the APIs as text. Decimal fields (unit-hours, shares, prices) arrive as JSON strings, so
// every figure goes through Number() first; a missing or unreadable one shows as "—".
export function fixed(value: unknown, digits: number): string {
  const n = typeof value === "number" ? value : Number(value);
  return value === null || value === undefined || Number.isNaN(n) ? "—" : n.toFixed(digits);
}
