import { Badge, Button, Card, Group, Stack, Text } from "@mantine/core";
import { TimeAgo } from "../../components/TimeAgo";
import { ProgressBar } from "./MigrationProgress";
import type { FaultEntry, IncidentSummary } from "./queries";

const FINAL = new Set(["resolved", "escalated"]);
const STATE_COLOR: Record<string, string> = { resolved: "green", escalated: "red" };

export function IncidentList({
  incidents,
  catalog,
  selected,
  onSelect,
}: {
  incidents: IncidentSummary[];
  catalog: Map<string, FaultEntry>;
  selected: string | null;
  onSelect: (id: string) => void;
}) {
  if (incidents.length === 0) return <Text>No incident: every GPU you can see is healthy.</Text>;
  const open = (i: IncidentSummary) => (FINAL.has(i.state) ? 1 : 0);
  return (
    <Stack component="ul" gap="sm" p={0} m={0} style={{ listStyle: "none" }} aria-label="Incidents">
      {[...incidents]
        .sort((a, b) => open(a) - open(b) || b.detected_at.localeCompare(a.detected_at))
        .map((i) => (
          <Card component="li" key={i.incident_id} withBorder padding="sm" aria-current={selected === i.incident_id ? "true" : undefined}>
            <Group justify="space-between" gap="xs">
              <Text fw={600}>
                {i.fault_type}
                {catalog.get(i.fault_type) ? ` — ${catalog.get(i.fault_type)!.description}` : ""}
              </Text>
              <Badge variant="dot" color={STATE_COLOR[i.state] ?? "blue"}>
                {i.state}
              </Badge>
            </Group>
            <Text size="sm">
              {i.node}
              {i.gpu ? ` / ${i.gpu}` : ""} · {i.severity} · action {i.action} · detected <TimeAgo at={i.detected_at} />
              {i.count > 1 ? ` · ${i.count} signals` : ""}
            </Text>
            {i.progress_percent !== null ? <ProgressBar label={`Migration progress of incident ${i.incident_id}`} percent={i.progress_percent} detail={i.state} /> : null}
            {i.escalation_reason ? <Text size="sm">Escalated: {i.escalation_reason}</Text> : null}
            <Group mt={4}>
              <Button variant="default" size="sm" mih={44} onClick={() => onSelect(i.incident_id)} aria-label={`Details of incident ${i.incident_id}`}>
                Details
              </Button>
            </Group>
          </Card>
        ))}
    </Stack>
  );
}
