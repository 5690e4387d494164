import { Anchor, Group, SimpleGrid, Stack, Text, Title } from "@mantine/core";
import { useEffect } from "react";
import { Link, useParams } from "react-router-dom";
import { ErrorAlert } from "../../components/QueryStatus";
import { useLiveGpus } from "../../live/LiveProvider";
import { METRICS, type Metric, type Point } from "../../live/ring";
import type { LiveSample } from "../../live/store";
import { useRules } from "../alerts/queries";
import { GpuCharts } from "./GpuCharts";
import { HealthBadge } from "./GpuList";
import { useGpuDetail, useGpuHistory, useGpuLatest, type GpuDetail, type HistoryWindow, type LatestSample } from "./queries";
import { thresholdFor } from "./threshold";

/** Rollup windows as chart points: each window's average at its start. */
export function historyPoints(windows: HistoryWindow[]): Point[] {
  return windows.map((w) => {
    const values: Partial<Record<Metric, number>> = {};
    for (const metric of METRICS) {
      const avg = w.stats[metric]?.avg;
      if (typeof avg === "number") values[metric] = avg;
    }
    return { ts: Date.parse(w.window_start) / 1000, values };
  });
}

function labelsOf(uuid: string, detail: GpuDetail | undefined, latest: LatestSample | undefined): Record<string, string> {
  const labels: Record<string, string> = { gpu: uuid };
  const node = detail?.node ?? latest?.node;
  const model = detail?.model ?? latest?.model;
  if (node) labels.node = node;
  if (model) labels.model = model;
  if (detail) Object.assign(labels, { pool: detail.pool, zone: detail.zone, region: detail.region });
  return labels;
}

function useFill(uuid: string, latest: LatestSample | undefined, windows: HistoryWindow[] | undefined) {
  const store = useLiveGpus([uuid]);
  useEffect(() => {
    if (store && windows) store.backfill(uuid, historyPoints(windows));
  }, [store, uuid, windows]);
  useEffect(() => {
    if (store && latest) store.ingest([latest as unknown as LiveSample]);
  }, [store, latest]);
}

export default function GpuDetailPage() {
  const uuid = useParams().uuid ?? "";
  const detail = useGpuDetail(uuid);
  const latest = useGpuLatest(uuid);
  const history = useGpuHistory(uuid);
  const rules = useRules();
  useFill(uuid, latest.data, history.data);

  const d = detail.data;
  const s = latest.data;
  const title = d || s ? `${d?.model ?? s?.model} #${d?.index ?? s?.index} on ${d?.node ?? s?.node}` : `GPU ${uuid}`;
  const temperature = thresholdFor(rules.data ?? [], "gpu_temp_c", labelsOf(uuid, d, s));
  const workload = s?.workload_id ?? d?.allocations[0]?.workload_id ?? null;

  return (
    <Stack>
      <Anchor component={Link} to="/gpus" mih={44} display="inline-flex" style={{ alignItems: "center" }}>
        ← All GPUs
      </Anchor>
      <Group justify="space-between">
        <Title order={1}>{title}</Title>
      </Group>
      {detail.error && latest.error ? <ErrorAlert error={latest.error} title="GPU not found" /> : null}
      <SimpleGrid cols={{ base: 1, sm: 3 }}>
        <Text size="sm" style={{ wordBreak: "break-all" }}>
          UUID: {uuid}
        </Text>
        <Group gap="xs">
          <Text size="sm">Health:</Text>
          <HealthBadge health={s?.lost_reason ? `lost: ${s.lost_reason}` : (d?.health ?? "unknown")} />
        </Group>
        <Text size="sm">
          Workload on it: {workload ?? "none"}
          {s?.tenant_id ? ` (tenant ${s.tenant_id})` : ""}
        </Text>
        {d ? (
          <Text size="sm">
            Pool {d.pool}, zone {d.zone}, {d.memory_mib / 1024} GiB, {d.units} compute units
            {d.mig_enabled ? ", MIG on" : ""}
          </Text>
        ) : null}
        {rules.error ? <Text size="sm">Alert rules did not load: the temperature threshold is not drawn.</Text> : null}
        {history.error ? <Text size="sm">History did not load: the charts start with live points.</Text> : null}
      </SimpleGrid>
      <GpuCharts gpu={uuid} temperature={temperature} />
    </Stack>
  );
}
