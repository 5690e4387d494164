// One workload's priority, term by term: 0.6 × urgency + 0.4 × (1 − fair share), clamped to 1.
import { Code, Stack, Table, Text } from "@mantine/core";
import { fixed } from "../../components/number";
import { QueryStatus } from "../../components/QueryStatus";
import { usePriority, type Priority } from "./queries";

const n = (value: number, digits = 3) => fixed(value, digits);

export function PriorityTable({ p }: { p: Priority }) {
  const rows: [string, string, string][] = [
    ["Urgency term", `0.6 × urgency ${n(p.urgency)}`, n(p.urgency_term)],
    [
      "Fair share",
      `used ${n(p.decayed_usage_unit_hours, 2)} of entitled ${n(p.entitlement_unit_hours, 2)} unit-hours (${p.shares} of ${p.total_shares} shares)`,
      n(p.fair_share),
    ],
    ["Fair-share term", `0.4 × (1 − ${n(p.fair_share)})`, n(p.fair_share_term)],
    ["Sum", "before clamping", n(p.raw)],
    ["Priority", p.pinned ? "min(sum, 1.0); kept from before its migration" : "min(sum, 1.0)", n(p.priority)],
  ];
  return (
    <Stack gap="xs">
      <Code>{p.formula}</Code>
      <Table aria-label={`Priority terms of ${p.workload_id}`}>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Term</Table.Th>
            <Table.Th>How</Table.Th>
            <Table.Th>Value</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map(([term, how, value]) => (
            <Table.Tr key={term}>
              <Table.Td>{term}</Table.Td>
              <Table.Td>{how}</Table.Td>
              <Table.Td>{value}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      <Text size="sm">{p.explanation}</Text>
    </Stack>
  );
}

export function PriorityTerms({ workloadId }: { workloadId: string }) {
  const priority = usePriority(workloadId);
  return (
    <QueryStatus query={priority} label="the priority terms">
      {priority.data ? <PriorityTable p={priority.data} /> : null}
    </QueryStatus>
  );
}
