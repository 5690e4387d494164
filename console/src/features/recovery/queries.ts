// recovery: incidents (also fed live by the stream), one incident's detail, SLO figures, the fault catalog.
import { useQuery } from "@tanstack/react-query";
import { api, data } from "../../api/client";
import type { components } from "../../api/gen/recovery";
import { INCIDENTS_KEY } from "../../live/keys";

export type IncidentSummary = components["schemas"]["IncidentSummary"];
export type IncidentDetail = components["schemas"]["IncidentDetail"];
export type Slo = components["schemas"]["SloOut"];
export type SloStats = components["schemas"]["SloStats"];
export type FaultEntry = components["schemas"]["FaultEntry"];

export function useIncidents() {
  return useQuery({ queryKey: INCIDENTS_KEY, queryFn: () => data(api.recovery.GET("/v1/incidents")) });
}

export const incidentKey = (id: string) => ["recovery", "/v1/incidents/{incident_id}", { incident_id: id }] as const;

export function useIncident(id: string | null) {
  return useQuery({
    queryKey: incidentKey(id ?? ""),
    queryFn: () => data(api.recovery.GET("/v1/incidents/{incident_id}", { params: { path: { incident_id: id! } } })),
    enabled: id !== null,
  });
}

export function useSlo(period: string) {
  return useQuery({
    queryKey: ["recovery", "/v1/stats/slo", { period }],
    queryFn: () => data(api.recovery.GET("/v1/stats/slo", { params: { query: { period } } })),
    placeholderData: (previous) => previous,
  });
}

export function useFaultCatalog() {
  return useQuery({
    queryKey: ["recovery", "/v1/catalog/faults", {}],
    queryFn: () => data(api.recovery.GET("/v1/catalog/faults")),
    staleTime: Infinity,
  });
}
