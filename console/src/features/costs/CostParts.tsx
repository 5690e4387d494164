// The parts of the Costs page, each given its data: the breakdown, budgets, idle notices, spot advice, exports.
import { Anchor, Group, Progress, Stack, Table, Text } from "@mantine/core";
import { TableScroll } from "../../components/TableScroll";
import { formatMicro } from "../../components/money";
import { TimeAgo } from "../../components/TimeAgo";
import { EXPORT_FORMATS, exportUrl, type Budget, type Costs, type IdleAction, type SpotAdvice, type Window } from "./queries";
import { fixed } from "../../components/number";

const FORMAT_NAME = { csv: "CSV", jsonl: "JSON Lines", parquet: "Parquet" } as const;

export function CostTable({ costs, label }: { costs: Costs; label: string }) {
  if (costs.groups.length === 0) return <Text>No charges in this period.</Text>;
  return (
    <TableScroll minWidth={480}>
      <Table aria-label={`Costs by ${label}`} striped>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>{label}</Table.Th>
            <Table.Th ta="right">Amount</Table.Th>
            <Table.Th ta="right">Compute-unit hours</Table.Th>
            <Table.Th ta="right">Share</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {costs.groups.map((g) => (
            <Table.Tr key={g.key}>
              <Table.Td>{g.key}</Table.Td>
              <Table.Td ta="right">{formatMicro(g.amount_micro)}</Table.Td>
              <Table.Td ta="right">{fixed(g.compute_unit_hours, 2)}</Table.Td>
              <Table.Td ta="right">{costs.total_micro > 0 ? `${((100 * g.amount_micro) / costs.total_micro).toFixed(1)}%` : "—"}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
        <Table.Tfoot>
          <Table.Tr>
            <Table.Th>Total</Table.Th>
            <Table.Th ta="right">{formatMicro(costs.total_micro)}</Table.Th>
            <Table.Th />
            <Table.Th />
          </Table.Tr>
        </Table.Tfoot>
      </Table>
    </TableScroll>
  );
}

export function BudgetBars({ budgets }: { budgets: Budget[] }) {
  if (budgets.length === 0) return <Text>No budget is set.</Text>;
  return (
    <Stack gap="sm">
      {budgets.map((b) => {
        const pct = b.limit_micro > 0 ? (100 * b.spent_micro) / b.limit_micro : 0;
        const color = pct >= 100 ? "red" : pct >= 80 ? "orange" : "blue";
        return (
          <Stack key={`${b.tenant_id}/${b.project}`} gap={2}>
            <Group justify="space-between" gap="xs">
              <Text size="sm" fw={600}>
                {b.project}
              </Text>
              <Text size="sm">
                {formatMicro(b.spent_micro)} of {formatMicro(b.limit_micro)} ({fixed(pct, 0)}%) in {b.month}
              </Text>
            </Group>
            <Progress.Root size="lg">
              <Progress.Section value={Math.min(pct, 100)} color={color} aria-label={`Budget of ${b.project}`} />
            </Progress.Root>
            <Text size="xs">
              {b.crossed.length ? `Crossed ${b.crossed.map((t) => `${t}%`).join(", ")}` : "No threshold crossed"}
              {b.hard_stop ? " · new work is refused at 100%" : ""}
            </Text>
          </Stack>
        );
      })}
    </Stack>
  );
}

export function IdleNotices({ actions }: { actions: IdleAction[] }) {
  if (actions.length === 0) return <Text>No idle workload: nothing to reclaim.</Text>;
  return (
    <Stack component="ul" gap={4} p={0} m={0} style={{ listStyle: "none" }} aria-label="Idle-reclaim notices">
      {actions.map((a) => (
        <Text component="li" size="sm" key={`${a.workload_id}/${a.stage}/${a.at}`}>
          {a.stage === "release" ? "Released" : "Warned"}: {a.workload_id} idle for {fixed(a.idle_hours, 0)} h · <TimeAgo at={a.at} />
        </Text>
      ))}
    </Stack>
  );
}

export function SpotAdviceView({ advice }: { advice: SpotAdvice }) {
  if (advice.advices.length === 0) return <Text>No workload in the last {advice.window_days} days would be cheaper on spot.</Text>;
  return (
    <Stack gap="xs">
      <Text size="sm">
        Moving interruption-tolerant work to spot would save <strong>{formatMicro(advice.saving_micro)}</strong> ({Number(advice.saving_pct).toFixed(1)}%) of{" "}
        {formatMicro(advice.current_cost_micro)} over the last {advice.window_days} days.
      </Text>
      <TableScroll minWidth={560}>
        <Table aria-label="Spot advice" striped>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Workload</Table.Th>
              <Table.Th>Resource</Table.Th>
              <Table.Th ta="right">On demand</Table.Th>
              <Table.Th ta="right">On spot</Table.Th>
              <Table.Th ta="right">Saving</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {advice.advices.map((a) => (
              <Table.Tr key={a.workload_id}>
                <Table.Td>{a.workload_id}</Table.Td>
                <Table.Td>{a.resource}</Table.Td>
                <Table.Td ta="right">{formatMicro(a.on_demand_micro)}</Table.Td>
                <Table.Td ta="right">{formatMicro(a.spot_micro)}</Table.Td>
                <Table.Td ta="right">
                  {formatMicro(a.saving_micro)} ({Number(a.saving_pct).toFixed(1)}%)
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </TableScroll>
    </Stack>
  );
}

export function ExportLinks({ projects, window, tenant }: { projects: string[]; window: Window; tenant: string | null }) {
  if (projects.length === 0) return <Text>No project has charges to export in this period.</Text>;
  return (
    <Stack component="ul" gap={4} p={0} m={0} style={{ listStyle: "none" }} aria-label="Exports">
      {projects.map((project) => (
        <Group component="li" key={project} gap="sm" wrap="wrap">
          <Text size="sm" fw={600} miw={120}>
            {project}
          </Text>
          {EXPORT_FORMATS.map((format) => (
            <Anchor
              key={format}
              href={exportUrl(project, format, window, tenant)}
              download
              aria-label={`Download ${project} as ${FORMAT_NAME[format]}`}
              mih={44}
              display="inline-flex"
              style={{ alignItems: "center" }}
            >
              {FORMAT_NAME[format]}
            </Anchor>
          ))}
        </Group>
      ))}
    </Stack>
  );
}
