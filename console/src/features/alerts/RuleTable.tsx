import { Table, Text } from "@mantine/core";
import { TableScroll } from "../../components/TableScroll";
import type { Rule } from "./queries";

function condition(rule: Rule): string {
  if (rule.kind === "promql") return rule.expr ?? "";
  if (rule.kind === "absent") return `${rule.metric} absent`;
  if (rule.kind === "increase") return `increase(${rule.metric}[${rule.window ?? "?"}]) ${rule.comparator} ${rule.threshold}`;
  return `${rule.metric} ${rule.comparator} ${rule.threshold}`;
}

export function RuleTable({ rules }: { rules: Rule[] }) {
  if (rules.length === 0) return <Text>No alert rules.</Text>;
  return (
    <TableScroll minWidth={720}>
      <Table aria-label="Alert rules" striped>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Rule</Table.Th>
            <Table.Th>Condition</Table.Th>
            <Table.Th>For</Table.Th>
            <Table.Th>Severity</Table.Th>
            <Table.Th>Owner</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rules.map((rule) => (
            <Table.Tr key={`${rule.owner_tenant ?? ""}/${rule.name}`}>
              <Table.Td>{rule.name}</Table.Td>
              <Table.Td>
                <code>{condition(rule)}</code>
              </Table.Td>
              <Table.Td>{rule.for}</Table.Td>
              <Table.Td>{rule.severity}</Table.Td>
              <Table.Td>{rule.owner_tenant ?? "global"}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </TableScroll>
  );
}
