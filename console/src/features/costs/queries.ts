// billing: costs grouped by project/team/model/day/tag, budgets, idle-reclaim actions, spot advice, export URLs.
import { useQuery } from "@tanstack/react-query";
import type { Budget, CostGroup, Costs } from "../../api/billing";
import { api, data } from "../../api/client";

export type { Budget, CostGroup, Costs };
export interface IdleAction {
  workload_id: string;
  tenant_id: string;
  stage: string;
  idle_hours: number;
  at: string;
}
export interface SpotAdvice {
  tenant_id: string;
  window_days: number;
  current_cost_micro: number;
  saving_micro: number;
  saving_pct: string;
  advices: { workload_id: string; resource: string; on_demand_micro: number; spot_micro: number; saving_micro: number; saving_pct: string }[];
}

export interface Window {
  start?: string;
  end?: string;
}

/** Admins act for one tenant (tenant_id); a tenant's own calls leave it out. */
const tenantQuery = (tenant: string | null) => (tenant ? { tenant_id: tenant } : {});

export function useCosts(groupBy: string, window: Window, tenant: string | null) {
  const query = { group_by: groupBy, ...window, ...tenantQuery(tenant) };
  return useQuery({
    queryKey: ["billing", "/v1/costs", query],
    queryFn: () => data(api.billing.GET("/v1/costs", { params: { query } })) as Promise<unknown> as Promise<Costs>,
    placeholderData: (previous) => previous,
  });
}

export function useBudgets(tenant: string | null) {
  const query = tenantQuery(tenant);
  return useQuery({
    queryKey: ["billing", "/v1/budgets", query],
    queryFn: () => data(api.billing.GET("/v1/budgets", { params: { query } })) as Promise<unknown> as Promise<Budget[]>,
  });
}

export function useIdleActions(tenant: string | null) {
  const query = tenantQuery(tenant);
  return useQuery({
    queryKey: ["billing", "/v1/idle/actions", query],
    queryFn: () => data(api.billing.GET("/v1/idle/actions", { params: { query } })) as Promise<unknown> as Promise<IdleAction[]>,
  });
}

/** Spot advice is per tenant: an admin gets it once a tenant is chosen. */
export function useSpotAdvice(tenant: string | null, { admin }: { admin: boolean }) {
  const query = tenantQuery(tenant);
  return useQuery({
    queryKey: ["billing", "/v1/spot-advice", query],
    queryFn: () => data(api.billing.GET("/v1/spot-advice", { params: { query } })) as Promise<unknown> as Promise<SpotAdvice>,
    enabled: !admin || tenant !== null,
  });
}

export const EXPORT_FORMATS = ["csv", "jsonl", "parquet"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** The gateway URL of a project's ledger export (the browser downloads it with the session cookie). */
export function exportUrl(project: string, format: ExportFormat, window: Window, tenant: string | null): string {
  const params = new URLSearchParams({ format });
  if (window.start) params.set("start", window.start);
  if (window.end) params.set("end", window.end);
  if (tenant) params.set("tenant_id", tenant);
  return `/api/billing/v1/exports/${encodeURIComponent(project)}?${params}`;
}
