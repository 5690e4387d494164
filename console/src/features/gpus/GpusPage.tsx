import { Group, Stack, Text, Title } from "@mantine/core";
import { useMediaQuery } from "@mantine/hooks";
import { useMemo, useRef } from "react";
import { useSession } from "../../api/session";
import { QueryStatus } from "../../components/QueryStatus";
import { GpuCards, GpuTable } from "./GpuList";
import { useInventoryGpus, useLatestSamples } from "./queries";
import { gpuRows, sameRows, type GpuRow } from "./rows";

export default function GpusPage() {
  const session = useSession();
  const samples = useLatestSamples();
  const inventory = useInventoryGpus();
  const phone = useMediaQuery("(max-width: 48em)");
  const computed = useMemo(
    () => gpuRows(samples.data ?? [], inventory.data ?? [], { admin: session.role === "admin" }),
    [samples.data, inventory.data, session.role],
  );
  // The 15 s refetch brings new metric values (the charts have them live already) but rarely new rows: the
  // table re-renders only when a row changed, not 64 rows of components every refetch.
  const shown = useRef<GpuRow[]>(computed);
  if (shown.current !== computed && !sameRows(shown.current, computed)) shown.current = computed;
  // Each rendered row's live values join the stream themselves (GpuList renders the rows near the view only).
  const rows = shown.current;

  return (
    <Stack>
      <Group justify="space-between">
        <Title order={1}>GPUs</Title>
      </Group>
      <QueryStatus query={samples} label="GPU samples">
        {inventory.error ? <Text size="sm">Inventory did not answer: pool, zone and health are unknown.</Text> : null}
        {rows.length === 0 ? (
          <Text>
            {session.role === "admin" ? "No GPU has reported yet." : "None of your workloads holds a GPU right now."}
          </Text>
        ) : (
          <>
            <Text size="sm">
              {rows.length} GPU{rows.length === 1 ? "" : "s"}, live at 1 Hz
            </Text>
            {phone ? <GpuCards rows={rows} /> : <GpuTable rows={rows} />}
          </>
        )}
      </QueryStatus>
    </Stack>
  );
}
