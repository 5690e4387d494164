import { Alert, Button, Group, Stack, Title } from "@mantine/core";
import { useState } from "react";
import { useSession } from "../../api/session";
import { errorMessage, QueryStatus } from "../../components/QueryStatus";
import { AlertList } from "./AlertList";
import { DeliveryTable } from "./DeliveryTable";
import { useAlerts, useCreateSilence, useDeliveries, useExpireSilence, useRules, useSilences } from "./queries";
import { RuleTable } from "./RuleTable";
import { SilenceForm } from "./SilenceForm";
import { SilenceTable } from "./SilenceTable";

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
      <section aria-labelledby="alerts-firing">
        <Title order={2} id="alerts-firing" size="h3" mb="sm">
          Firing and pending
        </Title>
        <QueryStatus query={alerts} label="alerts">
          <AlertList alerts={alerts.data ?? []} rules={rules.data ?? []} silences={silences.data ?? []} />
        </QueryStatus>
      </section>
      <section aria-labelledby="alerts-silences">
        <Title order={2} id="alerts-silences" size="h3" mb="sm">
          Silences
        </Title>
        <Stack>
          <QueryStatus query={silences} label="silences">
            <SilenceTable silences={silences.data ?? []} onExpire={(id) => expire.mutate(id)} expiring={expire.isPending ? (expire.variables ?? null) : null} />
          </QueryStatus>
          {expire.error ? (
            <Alert color="red" role="alert" title="Expire refused">
              {errorMessage(expire.error)}
            </Alert>
          ) : null}
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
      </section>
      <section aria-labelledby="alerts-rules">
        <Title order={2} id="alerts-rules" size="h3" mb="sm">
          Rules
        </Title>
        <QueryStatus query={rules} label="rules">
          <RuleTable rules={rules.data ?? []} />
        </QueryStatus>
      </section>
      <section aria-labelledby="alerts-deliveries">
        <Title order={2} id="alerts-deliveries" size="h3" mb="sm">
          Deliveries
        </Title>
        <QueryStatus query={deliveries} label="deliveries">
          <DeliveryTable deliveries={deliveries.data ?? []} />
        </QueryStatus>
      </section>
    </Stack>
  );
}
