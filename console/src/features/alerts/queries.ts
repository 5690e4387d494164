// alerting: firing alerts (also fed live by the stream), rules, silences, deliveries.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, data } from "../../api/client";
import type { components } from "../../api/gen/alerting";
import { ALERTS_KEY } from "../../live/keys";

export type Alert = components["schemas"]["AlertOut"];
export type Rule = components["schemas"]["RuleOut"];
export type Silence = components["schemas"]["SilenceOut"];
export type SilenceIn = components["schemas"]["SilenceIn"];

/** A notification and its attempts (GET /v1/deliveries answers plain objects). */
export interface Delivery {
  id: string;
  receiver: string;
  status: string;
  attempts: number;
  created_at: string;
  delivered_at: string | null;
  last_error: string | null;
  next_attempt_at: string | null;
  fingerprints: string[];
  attempt_log: { attempt: number; at: string; status_code: number | null; outcome: string; error: string | null }[];
}

const SILENCES_KEY = ["alerting", "/v1/silences", {}] as const;

export function useAlerts() {
  return useQuery({ queryKey: ALERTS_KEY, queryFn: () => data(api.alerting.GET("/v1/alerts", { params: { query: { state: "all" } } })) as Promise<Alert[]> });
}

export function useRules() {
  return useQuery({ queryKey: ["alerting", "/v1/rules", {}], queryFn: () => data(api.alerting.GET("/v1/rules")) });
}

export function useSilences() {
  return useQuery({ queryKey: SILENCES_KEY, queryFn: () => data(api.alerting.GET("/v1/silences")) });
}

export function useDeliveries() {
  return useQuery({
    queryKey: ["alerting", "/v1/deliveries", {}],
    queryFn: () => data(api.alerting.GET("/v1/deliveries")) as Promise<unknown> as Promise<Delivery[]>,
  });
}

export function useCreateSilence() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: SilenceIn) => data(api.alerting.POST("/v1/silences", { body })),
    onSuccess: () => client.invalidateQueries({ queryKey: SILENCES_KEY }),
  });
}

export function useExpireSilence() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (id: string) =>
      data(api.alerting.DELETE("/v1/silences/{silence_id}", { params: { path: { silence_id: id } } })),
    onSuccess: () => client.invalidateQueries({ queryKey: SILENCES_KEY }),
  });
}
