// Create-wizard data: images, GPU catalog, prices, advice, queue preview, and the draft's open/fill/submit calls.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, data } from "../../api/client";
import type { components } from "../../api/gen/scheduler";

export type Draft = components["schemas"]["DraftOut"];
export type Workload = components["schemas"]["WorkloadOut"];
export type StepName = "image" | "resources" | "network";

export interface Image {
  name: string;
  framework: string;
  versions: string[];
}
export interface MigProfile {
  name: string;
  memory_gb: number;
  units: string;
}
export interface GpuModel {
  name: string;
  memory_gb: number;
  units: string;
  mig_supported?: boolean;
  mig_profiles: MigProfile[];
}
export interface Catalog {
  models: GpuModel[];
}
export interface Price {
  price_id: string;
  gpu_model: string;
  mig_profile: string | null;
  share_of: number | null;
  pricing_class: string;
  basis: "compute_unit_hour" | "gpu_hour";
  micro_per_hour: number;
  effective_from: string;
  effective_to: string | null;
}
export interface Recommendation {
  model: string | null;
  count: number;
  memory_need_gb: number;
  reasons: string[];
  similar_jobs: number;
  history_too_thin: boolean;
  expected_duration_s: number | null;
  fleet_gpus: number;
}
export interface Prediction {
  p50_s: number | null;
  p90_s: number | null;
  samples: number;
  history_too_thin: boolean;
  reasons: string[];
}
export type QueuePreview = components["schemas"]["QueuePreviewOut"];
export type PriorityClass = "high" | "normal" | "low";
export interface RecommendationAsk {
  framework?: string;
  mode: "training" | "inference";
  model_size_b?: number;
}
export interface PreviewAsk {
  priority: PriorityClass;
  gpu_model?: string;
  gpu_count?: number;
}

export function useImages() {
  return useQuery({
    queryKey: ["scheduler", "/v1/images", {}],
    queryFn: async () => (await data(api.scheduler.GET("/v1/images"))) as unknown as Image[],
  });
}

export function useCatalog() {
  return useQuery({
    queryKey: ["inventory", "/v1/catalog", {}],
    queryFn: async () => (await data(api.inventory.GET("/v1/catalog"))) as unknown as Catalog,
  });
}

export function usePrices() {
  return useQuery({
    queryKey: ["billing", "/v1/prices", {}],
    queryFn: async () => (await data(api.billing.GET("/v1/prices"))) as unknown as Price[],
  });
}

export function useRecommendation(ask: RecommendationAsk) {
  return useQuery({
    queryKey: ["scheduler", "/v1/recommendations/gpu", ask],
    queryFn: async () =>
      (await data(api.scheduler.GET("/v1/recommendations/gpu", { params: { query: ask } }))) as unknown as Recommendation,
  });
}

export function usePrediction(ask: { framework?: string; model?: string }, enabled: boolean) {
  return useQuery({
    queryKey: ["scheduler", "/v1/predictions/duration", ask],
    queryFn: async () =>
      (await data(api.scheduler.GET("/v1/predictions/duration", { params: { query: ask } }))) as unknown as Prediction,
    enabled,
  });
}

export function useQueuePreview(ask: PreviewAsk, enabled: boolean) {
  return useQuery({
    queryKey: ["scheduler", "/v1/queue/preview", ask],
    queryFn: () => data(api.scheduler.GET("/v1/queue/preview", { params: { query: ask } })),
    enabled,
  });
}

export function useDraft(draftId: string | null) {
  return useQuery({
    queryKey: ["scheduler", "/v1/workloads/drafts/{draft_id}", { draftId }],
    queryFn: () =>
      data(api.scheduler.GET("/v1/workloads/drafts/{draft_id}", { params: { path: { draft_id: draftId ?? "" } } })),
    enabled: draftId !== null,
  });
}

function useDraftCache() {
  const client = useQueryClient();
  return (draft: Draft) =>
    client.setQueryData(["scheduler", "/v1/workloads/drafts/{draft_id}", { draftId: draft.draft_id }], draft);
}

export function useOpenDraft() {
  const cache = useDraftCache();
  return useMutation({
    mutationFn: (options: Record<string, unknown>) =>
      data(api.scheduler.POST("/v1/workloads/drafts", { body: { options } as never })),
    onSuccess: cache,
  });
}

export function useFillStep() {
  const cache = useDraftCache();
  return useMutation({
    mutationFn: ({ draftId, step, body }: { draftId: string; step: StepName; body: Record<string, unknown> }) =>
      data(
        api.scheduler.PUT("/v1/workloads/drafts/{draft_id}/{step}", {
          params: { path: { draft_id: draftId, step } },
          body: body as never,
        }),
      ),
    onSuccess: cache,
  });
}

export function useSubmitDraft() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (draftId: string) =>
      data(api.scheduler.POST("/v1/workloads/drafts/{draft_id}/submit", { params: { path: { draft_id: draftId } } })),
    onSuccess: () => client.invalidateQueries({ queryKey: ["scheduler"] }),
  });
}
