import { Group, Stack, Table, Text, Title } from "@mantine/core";
import { TableScroll } from "../../components/TableScroll";
import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useMemo, useState } from "react";
import { PageSection } from "../../components/PageSection";
import { QueryStatus } from "../../components/QueryStatus";
import { IncidentList } from "./IncidentList";
import { IncidentPanel } from "./IncidentPanel";
import { incidentKey, useFaultCatalog, useIncident, useIncidents, useSlo, type FaultEntry } from "./queries";
import { SloCard } from "./SloCard";

function Catalog({ faults }: { faults: FaultEntry[] }) {
  return (
    <TableScroll minWidth={720}>
      <Table aria-label="Fault catalog" striped>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Fault</Table.Th>
            <Table.Th>Meaning</Table.Th>
            <Table.Th>Severity</Table.Th>
            <Table.Th>First action</Table.Th>
            <Table.Th>Recoverable</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {faults.map((f) => (
            <Table.Tr key={f.key}>
              <Table.Td>{f.key}</Table.Td>
              <Table.Td>{f.description}</Table.Td>
              <Table.Td>{f.severity}</Table.Td>
              <Table.Td>{f.action}</Table.Td>
              <Table.Td>{f.recoverable ? "yes" : "no"}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </TableScroll>
  );
}

export default function RecoveryPage() {
  const [period, setPeriod] = useState("24h");
  const [selected, setSelected] = useState<string | null>(null);
  const incidents = useIncidents();
  const incident = useIncident(selected);
  const slo = useSlo(period);
  const catalog = useFaultCatalog();
  const byKey = useMemo(() => new Map((catalog.data?.faults ?? []).map((f) => [f.key, f])), [catalog.data]);

  // A live incidents event that changes the shown incident refreshes its detail (migration steps, diagnosis).
  const client = useQueryClient();
  const summary = incidents.data?.find((i) => i.incident_id === selected);
  const version = summary ? `${summary.state}/${summary.progress_percent}/${summary.count}` : "";
  useEffect(() => {
    if (selected && version) void client.invalidateQueries({ queryKey: incidentKey(selected) });
  }, [client, selected, version]);

  return (
    <Stack gap="lg">
      <Group justify="space-between">
        <Title order={1}>Recovery</Title>
      </Group>
      <PageSection id="recovery-slo" title="Recovery SLO">
        <QueryStatus query={slo} label="SLO figures">
          <SloCard slo={slo.data} period={period} onPeriod={setPeriod} />
        </QueryStatus>
      </PageSection>
      <PageSection id="recovery-incidents" title="Incidents">
        <Stack>
          <QueryStatus query={incidents} label="incidents">
            <IncidentList incidents={incidents.data ?? []} catalog={byKey} selected={selected} onSelect={setSelected} />
          </QueryStatus>
          {selected ? (
            <QueryStatus query={incident} label="the incident">
              {incident.data ? <IncidentPanel incident={incident.data} /> : null}
            </QueryStatus>
          ) : null}
        </Stack>
      </PageSection>
      <PageSection id="recovery-catalog" title="Fault catalog">
        <QueryStatus query={catalog} label="the fault catalog">
          {catalog.data?.faults.length ? <Catalog faults={catalog.data.faults} /> : <Text>The catalog is empty.</Text>}
        </QueryStatus>
      </PageSection>
    </Stack>
  );
}
