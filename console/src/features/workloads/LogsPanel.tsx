// The last lines of a workload's log in a scrollable block, refreshed on demand or followed every 2 s.
import { Button, Group, Paper, Stack, Switch, Text, Title } from "@mantine/core";
import { useEffect, useRef, useState } from "react";
import { QueryStatus } from "../../components/QueryStatus";
import { LOG_LINES, useLogs } from "./queries";

export function LogsPanel({ workloadId, onClose }: { workloadId: string; onClose: () => void }) {
  const [follow, setFollow] = useState(false);
  const logs = useLogs(workloadId, follow);
  const end = useRef<HTMLPreElement>(null);

  useEffect(() => {
    if (follow && end.current) end.current.scrollTop = end.current.scrollHeight;
  }, [follow, logs.data]);

  return (
    <Paper withBorder p="md" component="section" aria-label={`Logs of ${workloadId}`}>
      <Stack gap="xs">
        <Group justify="space-between" wrap="wrap">
          <Title order={2}>Logs of {workloadId}</Title>
          <Group gap="xs" wrap="wrap">
            <Switch label="Follow" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} size="md" />
            <Button size="md" mih={44} variant="light" onClick={() => void logs.refetch()} loading={logs.isFetching}>
              Refresh
            </Button>
            <Button size="md" mih={44} variant="default" onClick={onClose}>
              Close logs
            </Button>
          </Group>
        </Group>
        <Text size="sm">The last {LOG_LINES} lines.</Text>
        <QueryStatus query={logs} label="the log">
          <pre
            ref={end}
            tabIndex={0}
            aria-label={`Log of ${workloadId}`}
            style={{ maxHeight: "24rem", overflow: "auto", margin: 0, padding: "0.5rem", background: "var(--mantine-color-gray-1)", whiteSpace: "pre-wrap", wordBreak: "break-all" }}
          >
            {logs.data ? logs.data : "The log is empty so far."}
          </pre>
        </QueryStatus>
      </Stack>
    </Paper>
  );
}
