import { Button, Group, Stack, Title } from "@mantine/core";
import { useState } from "react";
import { useSession } from "../../api/session";
import { ErrorAlert, QueryStatus } from "../../components/QueryStatus";
import { AlertList } from "./AlertList";
import { DeliveryTable } from "./DeliveryTable";
import { useAlerts, useCreateSilence, useDeliveries, useExpireSilence, useRules, useSilences } from "./queries";
import { RuleTable } from "./RuleTable";
import { SilenceForm } from "./SilenceForm";
import { SilenceTable } from "./SilenceTable";
import { PageSection } from "../../components/PageSection";

export default function AlertsPage() {
  const session = useSession();
  const alerts = useAlerts();
  const rules = useRules();
  const silences = useSilences();
  const deliveries = useDeliveries();
  const create = useCreateSilence();
  const expire = useExpireSilence();
  const [creating, setCreating] = useState(false);

  return (
    <Stack gap="lg">
      <Group justify="space-between">
        <Title order={1}>Alerts</Title>
      </Group>
      <PageSection id="alerts-firing" title="Firing and pending">
        <QueryStatus query={alerts} label="alerts">
          <AlertList alerts={alerts.data ?? []} rules={rules.data ?? []} silences={silences.data ?? []} />
        </QueryStatus>
      </PageSection>
      <PageSection id="alerts-silences" title="Silences">
        <Stack>
          <QueryStatus query={silences} label="silences">
            <SilenceTable silences={silences.data ?? []} onExpire={(id) => expire.mutate(id)} expiring={expire.isPending ? (expire.variables ?? null) : null} />
          </QueryStatus>
          <ErrorAlert error={expire.error} title="Expire refused" />
          <Group>
            <Button variant={creating ? "default" : "filled"} mih={44} aria-expanded={creating} onClick={() => setCreating(!creating)}>
              {creating ? "Close the new silence form" : "New silence"}
            </Button>
          </Group>
          {creating ? (
            <SilenceForm
              createdBy={session.key_id}
              onSubmit={async (body) => {
                await create.mutateAsync(body);
                setCreating(false);
              }}
              busy={create.isPending}
            />
          ) : null}
        </Stack>
      </PageSection>
      <PageSection id="alerts-rules" title="Rules">
        <QueryStatus query={rules} label="rules">
          <RuleTable rules={rules.data ?? []} />
        </QueryStatus>
      </PageSection>
      <PageSection id="alerts-deliveries" title="Deliveries">
        <QueryStatus query={deliveries} label="deliveries">
          <DeliveryTable deliveries={deliveries.data ?? []} />
        </QueryStatus>
      </PageSection>
    </Stack>
  );
}
