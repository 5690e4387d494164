import { Button, Table, Text } from "@mantine/core";
import { TableScroll } from "../../components/TableScroll";
import { TimeAgo } from "../../components/TimeAgo";
import { matcherText, type Matcher } from "./matchers";
import type { Silence } from "./queries";

export function SilenceTable({ silences, onExpire, expiring }: { silences: Silence[]; onExpire: (id: string) => void; expiring: string | null }) {
  if (silences.length === 0) return <Text>No active or pending silence.</Text>;
  return (
    <TableScroll minWidth={820}>
      <Table aria-label="Silences" striped>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Matchers</Table.Th>
            <Table.Th>State</Table.Th>
            <Table.Th>Starts</Table.Th>
            <Table.Th>Ends</Table.Th>
            <Table.Th>Created by</Table.Th>
            <Table.Th>Comment</Table.Th>
            <Table.Th>Action</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {silences.map((s) => (
            <Table.Tr key={s.id}>
              <Table.Td>
                <code>{(s.matchers as Matcher[]).map(matcherText).join(", ")}</code>
              </Table.Td>
              <Table.Td>{s.active ? "active" : Date.parse(s.starts_at) > Date.now() ? "pending" : "expired"}</Table.Td>
              <Table.Td>
                <TimeAgo at={s.starts_at} />
              </Table.Td>
              <Table.Td>
                <TimeAgo at={s.ends_at} />
              </Table.Td>
              <Table.Td>{s.created_by}</Table.Td>
              <Table.Td>{s.comment}</Table.Td>
              <Table.Td>
                <Button size="sm" mih={44} variant="default" loading={expiring === s.id} onClick={() => onExpire(s.id)} aria-label={`Expire silence ${s.comment}`}>
                  Expire
                </Button>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </TableScroll>
  );
}
