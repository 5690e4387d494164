import { Group, NativeSelect, SimpleGrid, Stack, Text, TextInput, Title } from "@mantine/core";
import { useDebouncedValue } from "@mantine/hooks";
import { useState } from "react";
import { useSession } from "../../api/session";
import { PageSection } from "../../components/PageSection";
import { QueryStatus } from "../../components/QueryStatus";
import { TOUCH_INPUT } from "../../components/touch";
import { BudgetBars, CostTable, ExportLinks, IdleNotices, SpotAdviceView } from "./CostParts";
import { useBudgets, useCosts, useIdleActions, useSpotAdvice, type Window } from "./queries";

const GROUPINGS = [
  { value: "project", label: "Project" },
  { value: "team", label: "Team" },
  { value: "model", label: "GPU model" },
  { value: "day", label: "Day" },
  { value: "tag", label: "Tag" },
];

function monthStart(now = new Date()): string {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString().slice(0, 10);
}

/** Dates (YYYY-MM-DD, UTC days) as the API's window: start inclusive, end exclusive (the day after). */
export function windowOf(from: string, to: string): Window {
  const window: Window = {};
  if (from) window.start = `${from}T00:00:00Z`;
  if (to) window.end = new Date(Date.parse(`${to}T00:00:00Z`) + 86_400_000).toISOString().replace(".000Z", "Z");
  return window;
}

export default function CostsPage() {
  const session = useSession();
  const admin = session.role === "admin";
  const [grouping, setGrouping] = useState("project");
  const [tagKey, setTagKey] = useState("team");
  const [from, setFrom] = useState(monthStart());
  const [to, setTo] = useState("");
  const [tenantText, setTenantText] = useState("");
  // Typed values ask the service once typing pauses, not at every keystroke.
  const [typedTenant] = useDebouncedValue(tenantText.trim(), 300);
  const [typedTag] = useDebouncedValue(tagKey.trim(), 300);
  const tenant = admin ? typedTenant || null : null;
  const window = windowOf(from, to);
  const groupBy = grouping === "tag" ? `tag:${typedTag}` : grouping;

  const costs = useCosts(groupBy, window, tenant);
  const projects = useCosts("project", window, tenant);
  const budgets = useBudgets(tenant);
  const idle = useIdleActions(tenant);
  const spot = useSpotAdvice(tenant, { admin });
  const label = GROUPINGS.find((g) => g.value === grouping)!.label + (grouping === "tag" ? ` ${typedTag}` : "");
  const costsError = costs.error as { field?: string | null } | null;

  return (
    <Stack gap="lg">
      <Title order={1}>Costs</Title>
      <Text size="sm">Amounts are in the billing currency (the ledger keeps micro-units; shown here as whole units).</Text>
      <Group align="flex-end" wrap="wrap">
        {admin ? (
          <TextInput styles={TOUCH_INPUT} label="Tenant" description="Admins: whose costs (empty: all, where allowed)" value={tenantText} onChange={(e) => setTenantText(e.currentTarget.value)} />
        ) : null}
        <TextInput styles={TOUCH_INPUT} type="date" label="From (UTC day)" value={from} onChange={(e) => setFrom(e.currentTarget.value)} error={costsError?.field === "start" ? costs.error?.message : undefined} />
        <TextInput styles={TOUCH_INPUT} type="date" label="To (UTC day, inclusive)" value={to} onChange={(e) => setTo(e.currentTarget.value)} error={costsError?.field === "end" ? costs.error?.message : undefined} />
      </Group>
      <PageSection id="costs-breakdown" title="Breakdown">
        <Group align="flex-end" wrap="wrap" mb="sm">
          <NativeSelect styles={TOUCH_INPUT} label="Group costs by" data={GROUPINGS} value={grouping} onChange={(e) => setGrouping(e.currentTarget.value)} />
          {grouping === "tag" ? (
            <TextInput styles={TOUCH_INPUT} label="Tag key" value={tagKey} onChange={(e) => setTagKey(e.currentTarget.value)} error={costsError?.field === "group_by" ? costs.error?.message : undefined} />
          ) : null}
        </Group>
        <QueryStatus query={costs} label="costs">
          {costs.data ? <CostTable costs={costs.data} label={label} /> : null}
        </QueryStatus>
      </PageSection>
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <PageSection id="costs-budgets" title="Budgets this month">
          <QueryStatus query={budgets} label="budgets">
            <BudgetBars budgets={budgets.data ?? []} />
          </QueryStatus>
        </PageSection>
        <PageSection id="costs-idle" title="Idle reclaim">
          <QueryStatus query={idle} label="idle-reclaim notices">
            <IdleNotices actions={idle.data ?? []} />
          </QueryStatus>
        </PageSection>
      </SimpleGrid>
      <PageSection id="costs-spot" title="Spot advice">
        {admin && !tenant ? (
          <Text>Choose a tenant to see its spot advice.</Text>
        ) : (
          <QueryStatus query={spot} label="spot advice">
            {spot.data ? <SpotAdviceView advice={spot.data} /> : null}
          </QueryStatus>
        )}
      </PageSection>
      <PageSection id="costs-exports" title="Export the ledger">
        {admin && !tenant ? (
          <Text>Choose a tenant to export its projects.</Text>
        ) : (
          <QueryStatus query={projects} label="projects">
            <ExportLinks projects={(projects.data?.groups ?? []).map((g) => g.key)} window={window} tenant={tenant} />
          </QueryStatus>
        )}
      </PageSection>
    </Stack>
  );
}
