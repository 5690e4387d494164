// One incident: its diagnosis with the evidence behind each finding, each workload's migration, its history.
import { Code, List, Paper, Stack, Table, Text, Title } from "@mantine/core";
import { TableScroll } from "../../components/TableScroll";
import { TimeAgo } from "../../components/TimeAgo";
import { ProgressBar } from "./MigrationProgress";
import type { IncidentDetail } from "./queries";
import { fixed } from "../../components/number";

function Diagnosis({ incident }: { incident: IncidentDetail }) {
  const d = incident.diagnosis;
  if (!d) return <Text size="sm">Not diagnosed yet.</Text>;
  return (
    <Stack gap={4}>
      <Text size="sm">
        Probable cause: <strong>{d.probable_cause}</strong> (confidence {fixed(Number(d.confidence) * 100, 0)}%)
      </Text>
      {d.findings.length === 0 ? (
        <Text size="sm">No rule found evidence.</Text>
      ) : (
        <List size="sm" spacing={4}>
          {d.findings.map((f) => (
            <List.Item key={f.rule}>
              {f.rule}: {f.cause} ({fixed(Number(f.confidence) * 100, 0)}%) — evidence{" "}
              {Object.entries(f.evidence)
                .map(([k, v]) => `${k}=${v}`)
                .join(", ")}
            </List.Item>
          ))}
        </List>
      )}
    </Stack>
  );
}

export function IncidentPanel({ incident }: { incident: IncidentDetail }) {
  return (
    <Paper withBorder p="sm" radius="md" aria-label={`Incident ${incident.incident_id}`} component="section">
      <Stack gap="sm">
        <Title order={3} size="h4">
          Incident {incident.incident_id}: {incident.fault_type} on {incident.node}
          {incident.gpu ? ` / ${incident.gpu}` : ""}
        </Title>
        <Text size="sm">
          State {incident.state} · owner {incident.owner} · {incident.recoverable ? "recoverable" : "not recoverable"} · fault{" "}
          <TimeAgo at={incident.fault_at} />, detected <TimeAgo at={incident.detected_at} />
          {incident.recovered_at ? (
            <>
              , recovered <TimeAgo at={incident.recovered_at} />
            </>
          ) : null}
        </Text>
        <Title order={4} size="h5">
          Diagnosis
        </Title>
        <Diagnosis incident={incident} />
        <Title order={4} size="h5">
          Migrations
        </Title>
        {incident.migrations.length === 0 ? (
          <Text size="sm">No workload to move.</Text>
        ) : (
          incident.migrations.map((m) => (
            <Stack key={m.workload_id} gap={2}>
              <Text size="sm">
                {m.workload_id}: phase {m.phase}
                {m.restored === false ? " (restarted from the start)" : m.restored ? " (restored from its checkpoint)" : ""}
                {m.note ? ` — ${m.note}` : ""}
              </Text>
              <ProgressBar label={`Migration of ${m.workload_id}`} percent={m.percent} detail={m.phase} />
            </Stack>
          ))
        )}
        <Title order={4} size="h5">
          History
        </Title>
        <TableScroll minWidth={480}>
          <Table aria-label={`History of incident ${incident.incident_id}`}>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>When</Table.Th>
                <Table.Th>State</Table.Th>
                <Table.Th>Reason</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {incident.history.map((h, k) => (
                <Table.Tr key={k}>
                  <Table.Td>
                    <TimeAgo at={h.at} />
                  </Table.Td>
                  <Table.Td>{h.state}</Table.Td>
                  <Table.Td>{h.reason || "—"}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </TableScroll>
        {incident.actions?.length
          ? incident.actions.map((a) => (
              <Stack key={a.command_id} gap={2}>
                <Text size="sm">
                  {a.action} on {a.node}
                  {a.gpu ? ` / ${a.gpu}` : ""}: {a.outcome}
                  {a.reason ? ` (${a.reason})` : ""}
                </Text>
                {a.commands.length ? <Code block>{a.commands.map((c) => c.join(" ")).join("\n")}</Code> : null}
              </Stack>
            ))
          : null}
      </Stack>
    </Paper>
  );
}
