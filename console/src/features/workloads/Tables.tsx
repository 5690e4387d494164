// The queue (in order, with wait reasons) and the caller's workloads (state, wait reason, actions).
import { Badge, Button, Group, Paper, Stack, Table, Text } from "@mantine/core";
import { Fragment } from "react";
import { TimeAgo } from "../../components/TimeAgo";
import { PriorityTerms } from "./PriorityTerms";
import type { QueueEntry, Workload } from "./queries";
import { fixed } from "../../components/number";

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const STATE_COLOR: Record<string, string> = {
  running: "green",
  placed: "teal",
  queued: "blue",
  submitted: "blue",
  migrating: "orange",
  preempted: "orange",
  failed: "red",
  cancelled: "gray",
  completed: "gray",
};

export function cancellable(w: Workload): boolean {
  return !TERMINAL.has(w.state);
}

function resources(spec: Record<string, unknown>): string {
  const r = (spec.resources ?? {}) as Record<string, unknown>;
  if (r.kind === "gpu") return `${String(r.count)} × ${String(r.model)}`;
  if (r.kind === "mig") return `MIG ${String(r.profile)}${r.model ? ` on ${String(r.model)}` : ""}`;
  if (r.kind === "units") return `${String(r.units)} units`;
  return "";
}

export function QueueTable(props: { entries: QueueEntry[]; open: string | null; onToggle: (id: string) => void }) {
  const { entries, open, onToggle } = props;
  if (entries.length === 0) return <Text>Nothing is waiting in the queue.</Text>;
  return (
    <Table.ScrollContainer minWidth={720}>
      <Table aria-label="Queue">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Position</Table.Th>
            <Table.Th>Workload</Table.Th>
            <Table.Th>Priority</Table.Th>
            <Table.Th>Waiting for</Table.Th>
            <Table.Th>Estimated start</Table.Th>
            <Table.Th>Submitted</Table.Th>
            <Table.Th>Terms</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {entries.map((e) => (
            <Fragment key={e.workload_id}>
              <Table.Tr>
                <Table.Td>{e.position ?? "–"}</Table.Td>
                <Table.Td>{e.workload_id}</Table.Td>
                <Table.Td>{fixed(e.priority, 3)}</Table.Td>
                <Table.Td>{e.wait_reason ?? "its turn"}</Table.Td>
                <Table.Td>{e.estimated_start ? <TimeAgo at={e.estimated_start} /> : "unknown"}</Table.Td>
                <Table.Td>
                  <TimeAgo at={e.submitted_at} />
                </Table.Td>
                <Table.Td>
                  <Button
                    size="md" mih={44}
                    variant="subtle"
                    aria-expanded={open === e.workload_id}
                    aria-label={`${open === e.workload_id ? "Hide" : "Explain"} the priority of ${e.workload_id}`}
                    onClick={() => onToggle(e.workload_id)}
                  >
                    {open === e.workload_id ? "Hide" : "Explain"}
                  </Button>
                </Table.Td>
              </Table.Tr>
              {open === e.workload_id ? (
                <Table.Tr>
                  <Table.Td colSpan={7}>
                    <PriorityTerms workloadId={e.workload_id} />
                  </Table.Td>
                </Table.Tr>
              ) : null}
            </Fragment>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

interface WorkloadListProps {
  workloads: Workload[];
  onLogs: (id: string) => void;
  onCancel: (w: Workload) => void;
}

function Actions({ w, onLogs, onCancel }: { w: Workload } & Omit<WorkloadListProps, "workloads">) {
  return (
    <Group gap="xs" wrap="nowrap">
      <Button size="md" mih={44} variant="light" onClick={() => onLogs(w.workload_id)} aria-label={`Logs of ${w.workload_id}`}>
        Logs
      </Button>
      {cancellable(w) ? (
        <Button size="md" mih={44} variant="light" color="red" onClick={() => onCancel(w)} aria-label={`Cancel ${w.workload_id}`}>
          Cancel
        </Button>
      ) : null}
    </Group>
  );
}

function StateBadge({ state }: { state: string }) {
  return (
    <Badge color={STATE_COLOR[state] ?? "gray"} variant="dot" style={{ flexShrink: 0, overflow: "visible" }}>
      {state}
    </Badge>
  );
}

/** The same workloads as cards, for narrow screens. */
export function WorkloadCards({ workloads, onLogs, onCancel }: WorkloadListProps) {
  if (workloads.length === 0) return <Text>No workloads in this view.</Text>;
  return (
    <Stack gap="sm" role="list" aria-label="Workloads">
      {workloads.map((w) => (
        <Paper key={w.workload_id} withBorder p="sm" role="listitem">
          <Stack gap={4}>
            <Group justify="space-between" wrap="wrap">
              <Text fw={600} style={{ wordBreak: "break-all" }}>
                {w.workload_id}
              </Text>
              <StateBadge state={w.state} />
            </Group>
            <Text size="sm">
              {w.kind} · {resources(w.spec)} · priority {fixed(w.priority, 3)}
            </Text>
            {w.wait_reason || w.reason ? <Text size="sm">Wait reason: {w.wait_reason ?? w.reason}</Text> : null}
            <Text size="sm">
              Submitted <TimeAgo at={w.submitted_at} />
            </Text>
            <Actions w={w} onLogs={onLogs} onCancel={onCancel} />
          </Stack>
        </Paper>
      ))}
    </Stack>
  );
}

export function WorkloadTable(props: {
  workloads: Workload[];
  onLogs: (id: string) => void;
  onCancel: (w: Workload) => void;
}) {
  const { workloads, onLogs, onCancel } = props;
  if (workloads.length === 0) return <Text>No workloads in this view.</Text>;
  return (
    <Table.ScrollContainer minWidth={860}>
      <Table aria-label="Workloads">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Workload</Table.Th>
            <Table.Th>Kind</Table.Th>
            <Table.Th>State</Table.Th>
            <Table.Th>Wait reason</Table.Th>
            <Table.Th>Resources</Table.Th>
            <Table.Th>Priority</Table.Th>
            <Table.Th>Submitted</Table.Th>
            <Table.Th>Actions</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {workloads.map((w) => (
            <Table.Tr key={w.workload_id}>
              <Table.Td>{w.workload_id}</Table.Td>
              <Table.Td>{w.kind}</Table.Td>
              <Table.Td>
                <StateBadge state={w.state} />
              </Table.Td>
              <Table.Td>{w.wait_reason ?? (w.reason || "–")}</Table.Td>
              <Table.Td>{resources(w.spec)}</Table.Td>
              <Table.Td>{fixed(w.priority, 3)}</Table.Td>
              <Table.Td>
                <TimeAgo at={w.submitted_at} />
              </Table.Td>
              <Table.Td>
                <Actions w={w} onLogs={onLogs} onCancel={onCancel} />
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
