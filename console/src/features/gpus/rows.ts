// One row per GPU the caller sees: telemetry's latest sample joined with inventory's facts.
import type { InventoryGpu, LatestSample } from "./queries";

export interface GpuRow {
  uuid: string;
  node: string;
  index: number;
  model: string;
  pool: string | null;
  zone: string | null;
  health: string;
  workloadId: string | null;
  tenantId: string | null;
  reporting: boolean;
}

function health(sample: LatestSample | undefined, gpu: InventoryGpu | undefined): string {
  if (sample?.lost_reason) return `lost: ${sample.lost_reason}`;
  return gpu?.health ?? "unknown";
}

/**
 * The GPUs telemetry shows the caller (a tenant: its allocated GPUs); admins also get inventory's GPUs that have
 * not reported, so a silent GPU is not hidden.
 */
export function gpuRows(samples: LatestSample[], inventory: InventoryGpu[], { admin }: { admin: boolean }): GpuRow[] {
  const byUuid = new Map(inventory.map((g) => [g.uuid, g]));
  const rows: GpuRow[] = samples.map((s) => {
    const gpu = byUuid.get(s.gpu);
    return {
      uuid: s.gpu,
      node: s.node,
      index: s.index,
      model: s.model || gpu?.model || "",
      pool: gpu?.pool ?? null,
      zone: gpu?.zone ?? null,
      health: health(s, gpu),
      workloadId: s.workload_id ?? null,
      tenantId: s.tenant_id ?? null,
      reporting: true,
    };
  });
  if (admin) {
    const seen = new Set(rows.map((r) => r.uuid));
    for (const gpu of inventory) {
      if (seen.has(gpu.uuid)) continue;
      rows.push({
        uuid: gpu.uuid,
        node: gpu.node,
        index: gpu.index,
        model: gpu.model,
        pool: gpu.pool,
        zone: gpu.zone,
        health: gpu.health,
        workloadId: null,
        tenantId: null,
        reporting: false,
      });
    }
  }
  return rows.sort((a, b) => a.node.localeCompare(b.node) || a.index - b.index || a.uuid.localeCompare(b.uuid));
}

/** Whether two row lists show the same thing (row by row, field by field). */
export function sameRows(a: readonly GpuRow[], b: readonly GpuRow[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((row, i) => {
    const other = b[i];
    return (Object.keys(row) as (keyof GpuRow)[]).every((field) => row[field] === other[field]);
  });
}
