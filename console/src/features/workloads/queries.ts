// Workloads data: the caller's workloads (by state, paged), the queue, one workload's priority terms and log; cancel.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, data } from "../../api/client";
import type { components } from "../../api/gen/scheduler";

export type Workload = components["schemas"]["WorkloadOut"];
export type QueueEntry = components["schemas"]["QueueEntryOut"];
export type Priority = components["schemas"]["PriorityOut"];

export const PAGE_SIZE = 50;
export const LOG_LINES = 200;

export function useWorkloads(state: string | null, offset: number) {
  const query = { limit: PAGE_SIZE, offset, ...(state ? { state } : {}) };
  return useQuery({
    queryKey: ["scheduler", "/v1/workloads", query],
    queryFn: () => data(api.scheduler.GET("/v1/workloads", { params: { query } })),
  });
}

export function useQueue() {
  return useQuery({
    queryKey: ["scheduler", "/v1/queue", {}],
    queryFn: () => data(api.scheduler.GET("/v1/queue")),
  });
}

export function usePriority(workloadId: string) {
  return useQuery({
    queryKey: ["scheduler", "/v1/workloads/{workload_id}/priority", { workloadId }],
    queryFn: () =>
      data(api.scheduler.GET("/v1/workloads/{workload_id}/priority", { params: { path: { workload_id: workloadId } } })),
  });
}

export function useLogs(workloadId: string, follow: boolean) {
  const query = { tail: LOG_LINES };
  return useQuery({
    queryKey: ["scheduler", "/v1/workloads/{workload_id}/logs", { workloadId, ...query }],
    queryFn: async () => {
      const { data: text } = await api.scheduler.GET("/v1/workloads/{workload_id}/logs", {
        params: { path: { workload_id: workloadId }, query },
        parseAs: "text",
      });
      return (text ?? "") as string;
    },
    refetchInterval: follow ? 2_000 : false,
  });
}

export function useCancel() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (workloadId: string) =>
      data(api.scheduler.POST("/v1/workloads/{workload_id}/cancel", { params: { path: { workload_id: workloadId } } })),
    onSuccess: () =>
      Promise.all([
        client.invalidateQueries({ queryKey: ["scheduler", "/v1/workloads"] }),
        client.invalidateQueries({ queryKey: ["scheduler", "/v1/queue"] }),
      ]),
  });
}
