// The GPU list: a table on wide screens, cards on phones; each GPU with a live compute sparkline and values.
import { Anchor, Badge, Card, Group, Table, Text } from "@mantine/core";
import { TableScroll } from "../../components/TableScroll";
import { useWindowRows } from "../../components/windowRows";
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

const COLUMNS = ["GPU", "Pool / zone", "Health", "Workload", "Compute", "Memory used", "Temperature", "Power"];

/** A row standing for rows not rendered (hidden from assistive technology, which has aria-rowcount). */
function Spacer({ height }: { height: number }) {
  return (
    <Table.Tr aria-hidden="true" style={{ border: 0 }}>
      <Table.Td colSpan={COLUMNS.length} p={0} style={{ height, border: 0 }} />
    </Table.Tr>
  );
}

/**
 * The spacer for the rows above the first rendered one (`first`): one row, or two (the second empty) when
 * `first` is even, so each rendered row keeps its own stripe while the window moves (stripes count rows).
 */
function Above({ height, first }: { height: number; first: number }) {
  if (height <= 0) return null;
  return first % 2 === 1 ? (
    <Spacer height={height} />
  ) : (
    <>
      <Spacer height={height} />
      <Spacer height={0} />
    </>
  );
}

/**
 * The table; memoised, so a page render with the same rows (a refetch that changed no row) skips it. Only the
 * rows near the view are rendered (useWindowRows): a fleet's thousands of GPUs neither mount nor stream.
 */
export const GpuTable = memo(function GpuTable({ rows }: { rows: GpuRow[] }) {
  const { listRef, items, before, after, measure } = useWindowRows(rows.length, 57);
  return (
    <TableScroll minWidth={960}>
      <Table aria-label="GPUs" aria-rowcount={rows.length + 1} striped highlightOnHover verticalSpacing="xs">
        <Table.Thead>
          <Table.Tr aria-rowindex={1}>
            {COLUMNS.map((column) => (
              <Table.Th key={column}>{column}</Table.Th>
            ))}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody ref={listRef}>
          <Above height={before} first={items[0]?.index ?? 0} />
          {items.map(({ index }) => {
            const row = rows[index];
            return (
              <Table.Tr key={row.uuid} ref={measure} data-index={index} aria-rowindex={index + 2} {...{ [LIVE_ROW]: "" }}>
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
            );
          })}
          {after > 0 ? <Spacer height={after} /> : null}
        </Table.Tbody>
      </Table>
    </TableScroll>
  );
});

/** The cards, memoised like the table. */
export const GpuCards = memo(function GpuCards({ rows }: { rows: GpuRow[] }) {
  const { listRef, items, before, after, measure } = useWindowRows(rows.length, 150);
  // The space between cards is padding inside each item (not a flex gap), so a measured height includes it.
  return (
    <ul ref={listRef} aria-label="GPUs" style={{ listStyle: "none", padding: `${before}px 0 ${after}px`, margin: 0 }}>
      {items.map(({ index }) => {
        const row = rows[index];
        return (
          <li
            key={row.uuid}
            ref={measure}
            data-index={index}
            aria-setsize={rows.length}
            aria-posinset={index + 1}
            style={{ paddingBottom: "var(--mantine-spacing-sm)" }}
          >
            <Card withBorder padding="sm" {...{ [LIVE_ROW]: "" }}>
              <Group justify="space-between" wrap="wrap" gap="xs">
                <GpuLink row={row} />
                <HealthBadge health={row.health} />
              </Group>
              <Text size="sm">Workload: {row.workloadId ?? "idle"}</Text>
              {row.pool ? (
                <Text size="sm">
                  Pool {row.pool}, zone {row.zone}
                </Text>
              ) : null}
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
          </li>
        );
      })}
    </ul>
  );
});
