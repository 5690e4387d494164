// Overview data: capacity by pool, model and zone; firing alerts; incidents; this month's spend and budgets.
import { useQuery } from "@tanstack/react-query";
import type { Budget, CostGroup, Costs } from "../../api/billing";
import { api, data } from "../../api/client";
import { ALERTS_KEY } from "../../live/keys";
import type { components as Inventory } from "../../api/gen/inventory";
import type { components as Recovery } from "../../api/gen/recovery";

export type CapacityFigures = Inventory["schemas"]["CapacityFigures"];
export type Incident = Recovery["schemas"]["IncidentSummary"];

export type { Budget, CostGroup, Costs };

const GROUPS = "pool,model,zone";

export function useCapacity() {
  const query = { group_by: GROUPS };
  return useQuery({
    queryKey: ["inventory", "/v1/capacity", query],
    queryFn: () => data(api.inventory.GET("/v1/capacity", { params: { query } })),
  });
}

export function useFiringAlerts() {
  return useQuery({
    // The Alerts page's key: the live stream keeps it current (the summary keeps the firing ones).
    queryKey: ALERTS_KEY,
    queryFn: () => data(api.alerting.GET("/v1/alerts", { params: { query: { state: "all" } } })),
  });
}

export function useIncidents() {
  return useQuery({
    queryKey: ["recovery", "/v1/incidents", {}],
    queryFn: () => data(api.recovery.GET("/v1/incidents")),
  });
}

/** The first instant of `now`'s month in UTC, as the billing API's `start`. */
export function monthStart(now: Date = new Date()): string {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
}

export function useMonthCosts(start: string) {
  const query = { group_by: "project", start };
  return useQuery({
    queryKey: ["billing", "/v1/costs", query],
    queryFn: async () => (await data(api.billing.GET("/v1/costs", { params: { query } }))) as unknown as Costs,
  });
}

export function useBudgets() {
  return useQuery({
    queryKey: ["billing", "/v1/budgets", {}],
    queryFn: async () => (await data(api.billing.GET("/v1/budgets"))) as unknown as Budget[],
  });
}

