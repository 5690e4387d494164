// Overview: capacity in compute units by pool, model and zone; firing alerts; incidents in progress; spend this month.
import { Paper, SimpleGrid, Stack, Title } from "@mantine/core";
import type { ReactNode } from "react";
import { QueryStatus } from "../../components/QueryStatus";
import { CapacityBar, CapacityGroup } from "./CapacityBars";
import { monthStart, useBudgets, useCapacity, useFiringAlerts, useIncidents, useMonthCosts } from "./queries";
import { ActiveIncidents, FiringAlerts, MonthSpend } from "./Summaries";

function Section({ title, children }: { title: string; children: ReactNode }) {
  return (
    <Paper withBorder p="md" component="section" aria-label={title}>
      <Stack gap="sm">
        <Title order={2}>{title}</Title>
        {children}
      </Stack>
    </Paper>
  );
}

export default function OverviewPage() {
  const capacity = useCapacity();
  const alerts = useFiringAlerts();
  const incidents = useIncidents();
  const costs = useMonthCosts(monthStart());
  const budgets = useBudgets();

  return (
    <Stack>
      <Title order={1}>Overview</Title>
      <Section title="Capacity">
        <QueryStatus query={capacity} label="capacity">
          {capacity.data ? (
            <Stack gap="lg">
              <CapacityBar label="Whole fleet" figures={capacity.data.total} />
              <SimpleGrid cols={{ base: 1, md: 3 }} spacing="lg">
                <CapacityGroup title="By pool" groups={capacity.data.by_pool} />
                <CapacityGroup title="By model" groups={capacity.data.by_model} />
                <CapacityGroup title="By zone" groups={capacity.data.by_zone} />
              </SimpleGrid>
            </Stack>
          ) : null}
        </QueryStatus>
      </Section>
      <SimpleGrid cols={{ base: 1, md: 3 }}>
        <Section title="Firing alerts">
          <QueryStatus query={alerts} label="alerts">
            <FiringAlerts alerts={alerts.data ?? []} />
          </QueryStatus>
        </Section>
        <Section title="Incidents in progress">
          <QueryStatus query={incidents} label="incidents">
            <ActiveIncidents incidents={incidents.data ?? []} />
          </QueryStatus>
        </Section>
        <Section title="Spend this month">
          <QueryStatus query={{ isPending: costs.isPending || budgets.isPending, error: costs.error ?? budgets.error }} label="spend">
            {costs.data && budgets.data ? <MonthSpend costs={costs.data} budgets={budgets.data} /> : null}
          </QueryStatus>
        </Section>
      </SimpleGrid>
    </Stack>
  );
}
