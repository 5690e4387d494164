// GPUs: telemetry's latest samples (what the caller may see) joined with inventory's facts (pool, zone, health).
import { useQuery } from "@tanstack/react-query";
import { api, data } from "../../api/client";
import type { components as Inventory } from "../../api/gen/inventory";
import type { components as Telemetry } from "../../api/gen/telemetry";

export type LatestSample = Telemetry["schemas"]["LatestSample"];
export type HistoryWindow = Telemetry["schemas"]["HistoryWindow"];
export type InventoryGpu = Inventory["schemas"]["GpuOut"];
export type GpuDetail = Inventory["schemas"]["GpuDetail"];

/** How far back a chart's first fill reaches: the ring buffer's 5 minutes. */
export const HISTORY_S = 300;

export function useLatestSamples() {
  return useQuery({
    queryKey: ["telemetry", "/v1/gpus/latest", {}],
    queryFn: () => data(api.telemetry.GET("/v1/gpus/latest")),
    // Which workload holds a GPU changes now and then; the metrics themselves come live.
    refetchInterval: 15_000,
  });
}

export function useInventoryGpus() {
  return useQuery({ queryKey: ["inventory", "/v1/gpus", {}], queryFn: () => data(api.inventory.GET("/v1/gpus")) });
}

export function useGpuDetail(uuid: string) {
  return useQuery({
    queryKey: ["inventory", "/v1/gpus/{uuid}", { uuid }],
    queryFn: () => data(api.inventory.GET("/v1/gpus/{uuid}", { params: { path: { uuid } } })),
  });
}

export function useGpuLatest(uuid: string) {
  return useQuery({
    queryKey: ["telemetry", "/v1/gpus/{uuid}/latest", { uuid }],
    queryFn: () => data(api.telemetry.GET("/v1/gpus/{uuid}/latest", { params: { path: { uuid } } })),
  });
}

export function useGpuHistory(uuid: string) {
  return useQuery({
    queryKey: ["telemetry", "/v1/gpus/{uuid}/history", { uuid }],
    queryFn: () => {
      const end = new Date();
      const start = new Date(end.getTime() - HISTORY_S * 1000);
      const query = { start: start.toISOString(), end: end.toISOString() };
      return data(api.telemetry.GET("/v1/gpus/{uuid}/history", { params: { path: { uuid }, query } }));
    },
    staleTime: Infinity,
  });
}
