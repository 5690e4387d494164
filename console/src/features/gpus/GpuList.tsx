// The GPU list: a table on wide screens, cards on phones; each GPU with a live compute sparkline and values.
import { Anchor, Badge, Card, Group, Stack, Table, Text } from "@mantine/core";
import { TableScroll } from "../../components/TableScroll";
import { memo, type ReactNode } from "react";
import { Link } from "react-router-dom";
import { LiveText } from "../../live/LiveText";
import { LIVE_ROW } from "../../live/onScreen";
import { Sparkline } from "../../live/Sparkline";
import type { GpuRow } from "./rows";

const HEALTH_COLOR: Record<string, string> = { healthy: "green", degraded: "yellow", draining: "orange", failed: "red" };

export function HealthBadge({ health }: { health: string }) {
  return (
    // The whole word, never "HEALT…": the label's own overflow would let a crowded table squeeze it.
    <Badge variant="dot" color={HEALTH_COLOR[health] ?? "red"} styles={{ label: { overflow: "visible" } }}>
      {health}
    </Badge>
  );
}

function name(row: GpuRow): string {
  return `${row.model || "GPU"} #${row.index} on ${row.node}`;
}

function GpuLink({ row }: { row: GpuRow }) {
  return (
    <Anchor component={Link} to={`/gpus/${encodeURIComponent(row.uuid)}`} mih={44} display="inline-flex" style={{ alignItems: "center" }}>
      {name(row)}
    </Anchor>
  );
}

function Live({ row, children }: { row: GpuRow; children: ReactNode }) {
  return row.reporting ? <>{children}</> : <Text size="sm">not reporting</Text>;
}

/** The table; memoised, so a page render with the same rows (a refetch that changed no row) skips all 64. */
export const GpuTable = memo(function GpuTable({ rows }: { rows: GpuRow[] }) {
  return (
    <TableScroll minWidth={960}>
      <Table aria-label="GPUs" striped highlightOnHover verticalSpacing="xs">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>GPU</Table.Th>
            <Table.Th>Pool / zone</Table.Th>
            <Table.Th>Health</Table.Th>
            <Table.Th>Workload</Table.Th>
            <Table.Th>Compute</Table.Th>
            <Table.Th>Memory used</Table.Th>
            <Table.Th>Temperature</Table.Th>
            <Table.Th>Power</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map((row) => (
            <Table.Tr key={row.uuid} {...{ [LIVE_ROW]: "" }}>
              <Table.Td>
                <GpuLink row={row} />
              </Table.Td>
              <Table.Td>{row.pool ? `${row.pool} / ${row.zone}` : "—"}</Table.Td>
              <Table.Td>
                <HealthBadge health={row.health} />
              </Table.Td>
              <Table.Td>{row.workloadId ?? "idle"}</Table.Td>
              <Table.Td>
                <Live row={row}>
                  <Sparkline gpu={row.uuid} metric="sm_util_pct" title={`Compute utilisation of ${name(row)}`} />
                </Live>
              </Table.Td>
              <Table.Td>
                <Live row={row}>
                  <LiveText gpu={row.uuid} metric="fb_used_pct" />
                </Live>
              </Table.Td>
              <Table.Td>
                <Live row={row}>
                  <LiveText gpu={row.uuid} metric="gpu_temp_c" width="6em" />
                </Live>
              </Table.Td>
              <Table.Td>
                <Live row={row}>
                  <LiveText gpu={row.uuid} metric="power_w" width="6em" />
                </Live>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </TableScroll>
  );
});

/** The cards, memoised like the table. */
export const GpuCards = memo(function GpuCards({ rows }: { rows: GpuRow[] }) {
  return (
    <Stack gap="sm" component="ul" p={0} m={0} style={{ listStyle: "none" }} aria-label="GPUs">
      {rows.map((row) => (
        <Card component="li" key={row.uuid} withBorder padding="sm" {...{ [LIVE_ROW]: "" }}>
          <Group justify="space-between" wrap="wrap" gap="xs">
            <GpuLink row={row} />
            <HealthBadge health={row.health} />
          </Group>
          <Text size="sm">Workload: {row.workloadId ?? "idle"}</Text>
          {row.pool ? <Text size="sm">Pool {row.pool}, zone {row.zone}</Text> : null}
          <Live row={row}>
            <Sparkline gpu={row.uuid} metric="sm_util_pct" title={`Compute utilisation of ${name(row)}`} />
            <Group gap="md" wrap="wrap">
              <Text size="sm">
                Memory <LiveText gpu={row.uuid} metric="fb_used_pct" width="6.5em" />
              </Text>
              <Text size="sm">
                Temperature <LiveText gpu={row.uuid} metric="gpu_temp_c" width="4.5em" />
              </Text>
            </Group>
          </Live>
        </Card>
      ))}
    </Stack>
  );
});
