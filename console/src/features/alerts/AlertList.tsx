// Firing and pending alerts: state, severity and silenced-or-not in words; pending ones count down their `for`.
import { Badge, Stack, Table, Text } from "@mantine/core";
import { TableScroll } from "../../components/TableScroll";
import { useEffect, useState } from "react";
import { TimeAgo } from "../../components/TimeAgo";
import { firesIn, parseDuration } from "./durations";
import { allMatch, type Matcher } from "./matchers";
import type { Alert, Rule, Silence } from "./queries";

const SEVERITY_COLOR: Record<string, string> = { critical: "red", warning: "yellow", info: "blue" };

/** The active silences muting an alert. */
export function silencesOf(alert: Alert, silences: Silence[]): Silence[] {
  return silences.filter((s) => s.active && allMatch(s.matchers as Matcher[], alert.labels));
}

function Countdown({ alert, rule }: { alert: Alert; rule: Rule | undefined }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const id = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(id);
  }, []);
  // The service says when it fires (active_at + the rule's `for`); older answers leave it to the rule.
  const due = alert.fires_at ? Date.parse(alert.fires_at) : null;
  if (due !== null && Number.isFinite(due)) return <Text size="sm">{firesIn((due - now) / 1000)}</Text>;
  const forS = parseDuration(rule?.for ?? "");
  const since = Date.parse(alert.active_at ?? alert.starts_at);
  if (forS === null || !Number.isFinite(since)) return <Text size="sm">its rule's `for` is unknown</Text>;
  return <Text size="sm">{firesIn(since / 1000 + forS - now / 1000)}</Text>;
}

function AlertRow({ alert, rule, silencedBy }: { alert: Alert; rule: Rule | undefined; silencedBy: Silence[] }) {
  const labels = Object.entries(alert.labels).filter(([k]) => k !== "alertname");
  const summary = alert.annotations.summary ?? rule?.summary ?? "";
  return (
    <Table.Tr>
      <Table.Td>
        <Text fw={600} size="sm">
          {alert.rule}
        </Text>
        {summary ? <Text size="sm">{summary}</Text> : null}
      </Table.Td>
      <Table.Td>
        <Stack gap={2}>
          <Badge variant="dot" color={alert.status === "pending" ? "yellow" : "red"}>
            {alert.status}
          </Badge>
          {alert.status === "pending" ? <Countdown alert={alert} rule={rule} /> : null}
        </Stack>
      </Table.Td>
      <Table.Td>
        <Badge variant="dot" color={SEVERITY_COLOR[alert.severity] ?? "gray"}>
          {alert.severity}
        </Badge>
      </Table.Td>
      <Table.Td>
        <Text size="sm">{silencedBy.length ? "silenced" : "not silenced"}</Text>
        {silencedBy.length ? <Text size="xs">by {silencedBy.map((s) => `"${s.comment}"`).join(", ")}</Text> : null}
      </Table.Td>
      <Table.Td>
        <TimeAgo at={alert.active_at ?? alert.starts_at} />
        {alert.value !== null ? <Text size="xs">value {alert.value}</Text> : null}
      </Table.Td>
      <Table.Td>
        <Text size="xs" style={{ wordBreak: "break-all" }}>
          {labels.map(([k, v]) => `${k}=${v}`).join(" ")}
        </Text>
      </Table.Td>
    </Table.Tr>
  );
}

export function AlertList({ alerts, rules, silences }: { alerts: Alert[]; rules: Rule[]; silences: Silence[] }) {
  if (alerts.length === 0) return <Text>No alert is firing or pending.</Text>;
  const byName = new Map(rules.map((r) => [r.name, r]));
  const order = (a: Alert) => (a.status === "firing" ? 0 : 1);
  return (
    <TableScroll minWidth={860}>
      <Table aria-label="Firing and pending alerts" striped>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Alert</Table.Th>
            <Table.Th>State</Table.Th>
            <Table.Th>Severity</Table.Th>
            <Table.Th>Silenced</Table.Th>
            <Table.Th>Since</Table.Th>
            <Table.Th>Labels</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {[...alerts]
            .sort((a, b) => order(a) - order(b))
            .map((alert) => (
              <AlertRow key={alert.fingerprint} alert={alert} rule={byName.get(alert.rule)} silencedBy={silencesOf(alert, silences)} />
            ))}
        </Table.Tbody>
      </Table>
    </TableScroll>
  );
}
