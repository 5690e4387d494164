// Workloads: the queue with each priority's terms explained, the caller's workloads by state, cancel, and logs.
import { Button, Group, Modal, Paper, Select, Stack, Text, Title } from "@mantine/core";
import { useMediaQuery } from "@mantine/hooks";
import { useState } from "react";
import { ErrorAlert, QueryStatus } from "../../components/QueryStatus";
import { LogsPanel } from "./LogsPanel";
import { PAGE_SIZE, useCancel, useQueue, useWorkloads, type Workload } from "./queries";
import { QueueTable, WorkloadCards, WorkloadTable } from "./Tables";

const STATES = ["submitted", "queued", "placed", "running", "migrating", "preempted", "completed", "failed", "cancelled"];

function CancelDialog({ target, onClose }: { target: Workload | null; onClose: () => void }) {
  const cancel = useCancel();
  const close = () => {
    cancel.reset();
    onClose();
  };
  return (
    <Modal opened={target !== null} onClose={close} closeButtonProps={{ "aria-label": "Close" }} title={target ? `Cancel ${target.workload_id}?` : ""}>
      {target ? (
        <Stack>
          <Text>
            {target.workload_id} is {target.state}. Cancelling stops it and releases its GPUs; this cannot be undone.
          </Text>
          <ErrorAlert error={cancel.error} title="Cancel refused" />
          <Group justify="flex-end">
            <Button size="md" mih={44} variant="default" onClick={close}>
              Keep it
            </Button>
            <Button size="md" mih={44} color="red" loading={cancel.isPending} onClick={() => cancel.mutate(target.workload_id, { onSuccess: close })}>
              Cancel workload
            </Button>
          </Group>
        </Stack>
      ) : null}
    </Modal>
  );
}

export default function WorkloadsPage() {
  const [state, setState] = useState<string | null>(null);
  const [offset, setOffset] = useState(0);
  const [explained, setExplained] = useState<string | null>(null);
  const [logs, setLogs] = useState<string | null>(null);
  const [cancelling, setCancelling] = useState<Workload | null>(null);
  const queue = useQueue();
  const workloads = useWorkloads(state, offset);
  const page = workloads.data ?? [];
  const narrow = useMediaQuery("(max-width: 48em)");
  const List = narrow ? WorkloadCards : WorkloadTable;

  return (
    <Stack>
      <Title order={1}>Workloads</Title>
      <Paper withBorder p="md" component="section" aria-label="Queue">
        <Stack gap="sm">
          <Title order={2}>Queue</Title>
          <Text size="sm">priority = min(0.6 × urgency + 0.4 × (1 − fair share), 1.0); 20% of base capacity stays reserved for low priority.</Text>
          <QueryStatus query={queue} label="the queue">
            <QueueTable entries={queue.data ?? []} open={explained} onToggle={(id) => setExplained(explained === id ? null : id)} />
          </QueryStatus>
        </Stack>
      </Paper>
      <Paper withBorder p="md" component="section" aria-label="Your workloads">
        <Stack gap="sm">
          <Group justify="space-between" wrap="wrap" align="flex-end">
            <Title order={2}>Your workloads</Title>
            <Select
              label="State"
              placeholder="All states"
              data={STATES}
              value={state}
              onChange={(value) => {
                setState(value);
                setOffset(0);
              }}
              clearable
              w={220}
            />
          </Group>
          <QueryStatus query={workloads} label="workloads">
            <List workloads={page} onLogs={setLogs} onCancel={setCancelling} />
          </QueryStatus>
          <Group justify="space-between">
            <Button size="md" mih={44} variant="default" disabled={offset === 0} onClick={() => setOffset(Math.max(offset - PAGE_SIZE, 0))}>
              Previous page
            </Button>
            <Text size="sm">
              {page.length === 0 ? "none" : `${offset + 1}–${offset + page.length}`}
            </Text>
            <Button size="md" mih={44} variant="default" disabled={page.length < PAGE_SIZE} onClick={() => setOffset(offset + PAGE_SIZE)}>
              Next page
            </Button>
          </Group>
        </Stack>
      </Paper>
      {logs ? <LogsPanel workloadId={logs} onClose={() => setLogs(null)} /> : null}
      <CancelDialog target={cancelling} onClose={() => setCancelling(null)} />
    </Stack>
  );
}
