import { describe, expect, it } from "vitest";
import { gpuRows, sameRows } from "./rows";
import type { InventoryGpu, LatestSample } from "./queries";

const sample = (gpu: string, extra: Partial<LatestSample> = {}) =>
  ({ gpu, node: "n1", index: 0, model: "H100", at: "2026-12-04T00:00:00Z", workload_id: "w-1", ...extra }) as LatestSample;
const inventory = [{ uuid: "GPU-a", node: "n1", index: 0, model: "H100", pool: "train", zone: "z1", health: "healthy" }] as InventoryGpu[];

describe("sameRows", () => {
  it("holds for a refetch whose metric values alone changed", () => {
    const before = gpuRows([sample("GPU-a", { sm_util_pct: 10 } as Partial<LatestSample>)], inventory, { admin: false });
    const after = gpuRows([sample("GPU-a", { sm_util_pct: 90 } as Partial<LatestSample>)], inventory, { admin: false });
    expect(after).not.toBe(before);
    expect(sameRows(before, after)).toBe(true);
  });

  it("fails when a row's workload, health or the set of GPUs changed", () => {
    const before = gpuRows([sample("GPU-a")], inventory, { admin: false });
    expect(sameRows(before, gpuRows([sample("GPU-a", { workload_id: "w-2" })], inventory, { admin: false }))).toBe(false);
    expect(sameRows(before, gpuRows([sample("GPU-a", { lost_reason: "silent" })], inventory, { admin: false }))).toBe(false);
    expect(sameRows(before, gpuRows([sample("GPU-a"), sample("GPU-b", { index: 1 })], inventory, { admin: false }))).toBe(false);
    expect(sameRows(before, [])).toBe(false);
  });
});
