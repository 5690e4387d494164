// Billing's answers that its OpenAPI leaves untyped (its routes return plain dicts): written here once.
// Decimal figures (unit-hours) arrive as JSON strings; read them through components/number.ts.
export interface CostGroup {
  key: string;
  amount_micro: number;
  compute_unit_hours: string;
}
export interface Costs {
  group_by: string;
  total_micro: number;
  groups: CostGroup[];
}
export interface Budget {
  tenant_id: string;
  project: string;
  limit_micro: number;
  thresholds: number[];
  hard_stop: boolean;
  spent_micro: number;
  crossed: number[];
  month: string;
}
