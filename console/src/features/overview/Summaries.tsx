// The overview's short lists: firing alerts, incidents in progress, and this month's spend against budget.
import { Badge, Button, Group, List, Progress, Stack, Text } from "@mantine/core";
import { Link } from "react-router-dom";
import type { components as Alerting } from "../../api/gen/alerting";
import { formatMicro } from "../../components/money";
import { TimeAgo } from "../../components/TimeAgo";
import type { Budget, Costs, Incident } from "./queries";

type Alert = Alerting["schemas"]["AlertOut"];
const CLOSED = new Set(["resolved", "escalated"]);

export function inProgress(incidents: Incident[]): Incident[] {
  return incidents.filter((i) => !CLOSED.has(i.state));
}

export function FiringAlerts({ alerts }: { alerts: Alert[] }) {
  const firing = alerts.filter((a) => a.status === "firing");
  if (firing.length === 0) return <Text>No alerts are firing.</Text>;
  return (
    <Stack gap="xs">
    <List spacing="xs" aria-label="Firing alerts">
      {firing.map((a) => (
        <List.Item key={a.fingerprint}>
          <Group gap="xs" wrap="wrap">
            <Badge color={a.severity === "critical" ? "red" : "orange"}>{a.severity}</Badge>
            <Text span fw={500}>
              {a.rule}
            </Text>
            <Text span size="sm">
              {a.annotations.summary ?? Object.entries(a.labels).map(([k, v]) => `${k}=${v}`).join(", ")}
            </Text>
            <Text span size="sm">
              since <TimeAgo at={a.starts_at} />
            </Text>
          </Group>
        </List.Item>
      ))}
    </List>
      <Button component={Link} to="/alerts" variant="subtle" size="md" mih={44} w="fit-content">
        All alerts
      </Button>
    </Stack>
  );
}

export function ActiveIncidents({ incidents }: { incidents: Incident[] }) {
  const open = inProgress(incidents);
  if (open.length === 0) return <Text>No incidents in progress.</Text>;
  return (
    <Stack gap="sm" aria-label="Incidents in progress">
      {open.map((i) => (
        <Stack key={i.incident_id} gap={2}>
          <Group gap="xs" wrap="wrap">
            <Text fw={500}>{i.fault_type}</Text>
            <Text size="sm">
              on {i.node}
              {i.gpu ? ` / ${i.gpu}` : ""} · {i.state} · detected <TimeAgo at={i.detected_at} />
            </Text>
          </Group>
          {i.progress_percent === null ? null : (
            <Progress
              value={i.progress_percent}
              aria-label={`Recovery of ${i.incident_id}: ${Math.round(i.progress_percent)}%`}
            />
          )}
        </Stack>
      ))}
      <Button component={Link} to="/recovery" variant="subtle" size="md" mih={44} w="fit-content">
        All incidents
      </Button>
    </Stack>
  );
}

export function MonthSpend({ costs, budgets }: { costs: Costs; budgets: Budget[] }) {
  const limit = budgets.reduce((sum, b) => sum + b.limit_micro, 0);
  return (
    <Stack gap="sm">
      <Text>
        Spent this month: <strong>{formatMicro(costs.total_micro)}</strong>
        {limit > 0 ? ` of ${formatMicro(limit)} budgeted` : " (no budget set)"}
      </Text>
      {budgets.map((b) => {
        const pct = b.limit_micro > 0 ? Math.min((b.spent_micro / b.limit_micro) * 100, 100) : 0;
        const text = `${b.project}: ${formatMicro(b.spent_micro)} of ${formatMicro(b.limit_micro)} (${Math.round(pct)}%)`;
        return (
          <Stack key={`${b.tenant_id}/${b.project}`} gap={2}>
            <Text size="sm">{text}</Text>
            <Progress value={pct} color={pct >= 100 ? "red" : pct >= 80 ? "orange" : "blue"} aria-label={`Budget ${text}`} />
          </Stack>
        );
      })}
    </Stack>
  );
}
