import { Paper, SegmentedControl, SimpleGrid, Stack, Text } from "@mantine/core";
import { fixed } from "../../components/number";
import type { Slo, SloStats } from "./queries";

export const PERIODS = ["24h", "7d", "30d"];

const seconds = (s: number | null) => (s === null ? "—" : Number(s) < 120 ? `${fixed(s, 1)} s` : `${fixed(Number(s) / 60, 1)} min`);
const share = (x: number | null) => (x === null ? "—" : `${fixed(Number(x) * 100, 1)}%`);

function Figure({ label, value }: { label: string; value: string }) {
  return (
    <div>
      <Text size="xs">{label}</Text>
      <Text fw={700}>{value}</Text>
    </div>
  );
}

export function SloFigures({ stats }: { stats: SloStats }) {
  return (
    <SimpleGrid cols={{ base: 2, sm: 4 }}>
      <Figure label="Incidents" value={`${stats.incidents}`} />
      <Figure label="Affected a workload" value={`${stats.measured}`} />
      <Figure label="Recovered" value={`${stats.recovered}`} />
      <Figure label="Running again within 3 min" value={share(stats.share_within_3m)} />
      <Figure label="Running again within 1 min" value={share(stats.share_within_1m)} />
      <Figure label="Recovery p50 / p99" value={`${seconds(stats.recover_p50_s)} / ${seconds(stats.recover_p99_s)}`} />
      <Figure label="Detection p50 / p99" value={`${seconds(stats.detect_p50_s)} / ${seconds(stats.detect_p99_s)}`} />
    </SimpleGrid>
  );
}

export function SloCard({ slo, period, onPeriod }: { slo: Slo | undefined; period: string; onPeriod: (p: string) => void }) {
  return (
    <Paper withBorder p="sm" radius="md">
      <Stack gap="sm">
        <SegmentedControl aria-label="SLO period" data={PERIODS} value={period} onChange={onPeriod} />
        {slo ? (
          <>
            <Text size="sm">
              Detection to the workloads running again, over the incidents since {new Date(slo.since).toISOString().slice(0, 16).replace("T", " ")} UTC
            </Text>
            <SloFigures stats={slo.overall} />
          </>
        ) : null}
      </Stack>
    </Paper>
  );
}
