import { Table, Text } from "@mantine/core";
import { TableScroll } from "../../components/TableScroll";
import { TimeAgo } from "../../components/TimeAgo";
import type { Delivery } from "./queries";

export function DeliveryTable({ deliveries }: { deliveries: Delivery[] }) {
  if (deliveries.length === 0) return <Text>No notification has been sent yet.</Text>;
  return (
    <TableScroll minWidth={760}>
      <Table aria-label="Deliveries" striped>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Created</Table.Th>
            <Table.Th>Receiver</Table.Th>
            <Table.Th>Status</Table.Th>
            <Table.Th>Attempts</Table.Th>
            <Table.Th>Alerts</Table.Th>
            <Table.Th>Last error</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {deliveries.map((d) => (
            <Table.Tr key={d.id}>
              <Table.Td>
                <TimeAgo at={d.created_at} />
              </Table.Td>
              <Table.Td>{d.receiver}</Table.Td>
              <Table.Td>{d.status}</Table.Td>
              <Table.Td>{d.attempts}</Table.Td>
              <Table.Td>{d.fingerprints.length}</Table.Td>
              <Table.Td>{d.last_error ?? "—"}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </TableScroll>
  );
}
