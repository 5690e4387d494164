// "Describe what you need": the scheduler reads the text and opens a draft filled as far as it understood.
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api, data } from "../../api/client";
import type { components } from "../../api/gen/scheduler";

export type Draft = components["schemas"]["DraftOut"];

export type Described = components["schemas"]["DescribeOut"];

export function useDescribe() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (text: string) =>
      data(api.scheduler.POST("/v1/workloads/drafts/describe", { body: { text } })),
    onSuccess: (described) =>
      client.setQueryData(["scheduler", "/v1/workloads/drafts/{draft_id}", { draftId: described.draft.draft_id }], described.draft),
  });
}
