// One tenant's fair-share weight and quota limits (with live usage), each editable; empty limit = unlimited.
import { Button, Group, NumberInput, Paper, SimpleGrid, Stack, Table, Text, Title } from "@mantine/core";
import { useEffect, useState, type FormEvent } from "react";
import { ErrorAlert, QueryStatus } from "../../components/QueryStatus";
import { fieldError, namesField } from "./fieldError";
import { usePutQuota, usePutShare, useQuota, useShare, type QuotaLimits } from "./queries";
import { fixed } from "../../components/number";

function ShareForm({ tenantId }: { tenantId: string }) {
  const share = useShare(tenantId);
  const put = usePutShare(tenantId);
  const [shares, setShares] = useState<number | string>("");
  useEffect(() => {
    if (share.data) setShares(share.data.shares);
  }, [share.data]);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    put.mutate(Number(shares));
  };
  return (
    <Paper withBorder p="md" component="form" onSubmit={submit} aria-label={`Fair share of ${tenantId}`}>
      <Stack gap="xs">
        <Title order={3}>Fair share</Title>
        <QueryStatus query={share} label="the share">
          {share.data ? (
            <Text size="sm">
              {share.data.shares} of {share.data.total_shares} shares ({fixed(Number(share.data.share_fraction) * 100, 1)}%): entitled to{" "}
              {fixed(share.data.entitlement_unit_hours, 1)} unit-hours, used {fixed(share.data.decayed_usage_unit_hours, 1)}; fair share{" "}
              {fixed(share.data.fair_share, 3)}.
            </Text>
          ) : null}
        </QueryStatus>
        <NumberInput
          hideControls label="Shares" min={0.001} value={shares} onChange={setShares} error={fieldError(put.error, "shares")} required />
        {put.error && !namesField(put.error, ["shares"]) ? <ErrorAlert error={put.error} title="Share not saved" /> : null}
        {put.isSuccess ? <Text role="status">Saved.</Text> : null}
        <Group>
          <Button type="submit" size="md" mih={44} loading={put.isPending}>
            Save shares
          </Button>
        </Group>
      </Stack>
    </Paper>
  );
}

type LimitName = keyof QuotaLimits;
const LIMITS: [LimitName, string][] = [
  ["gpus", "Whole GPUs"],
  ["units", "Compute units"],
  ["workloads", "Concurrent workloads"],
];

function QuotaForm({ tenantId }: { tenantId: string }) {
  const quota = useQuota(tenantId);
  const put = usePutQuota(tenantId);
  const [limits, setLimits] = useState<Record<LimitName, number | string>>({ gpus: "", units: "", workloads: "" });
  useEffect(() => {
    const l = quota.data?.limits;
    if (l) setLimits({ gpus: l.gpus ?? "", units: l.units ?? "", workloads: l.workloads ?? "" });
  }, [quota.data]);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const body: QuotaLimits = {};
    for (const [name] of LIMITS) body[name] = limits[name] === "" ? null : Number(limits[name]);
    put.mutate(body);
  };
  return (
    <Paper withBorder p="md" component="form" onSubmit={submit} aria-label={`Quota of ${tenantId}`}>
      <Stack gap="xs">
        <Title order={3}>Quota</Title>
        <QueryStatus query={quota} label="the quota">
          {quota.data ? (
            <Table aria-label={`Quota usage of ${tenantId}`}>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Limit</Table.Th>
                  <Table.Th>In use</Table.Th>
                  <Table.Th>Allowed</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {LIMITS.map(([name, label]) => (
                  <Table.Tr key={name}>
                    <Table.Td>{label}</Table.Td>
                    <Table.Td>{quota.data.usage[name] ?? 0}</Table.Td>
                    <Table.Td>{quota.data.limits[name] ?? "unlimited"}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          ) : null}
        </QueryStatus>
        {LIMITS.map(([name, label]) => (
          <NumberInput
          hideControls
            key={name}
            label={`${label} limit`}
            description="Empty: unlimited"
            min={0}
            value={limits[name]}
            onChange={(value) => setLimits({ ...limits, [name]: value })}
            error={fieldError(put.error, name)}
          />
        ))}
        {put.error && !namesField(put.error, LIMITS.map(([n]) => n)) ? <ErrorAlert error={put.error} title="Quota not saved" /> : null}
        {put.isSuccess ? <Text role="status">Saved.</Text> : null}
        <Group>
          <Button type="submit" size="md" mih={44} loading={put.isPending}>
            Save quota
          </Button>
        </Group>
      </Stack>
    </Paper>
  );
}

export function ShareQuota({ tenantId }: { tenantId: string }) {
  return (
    <Stack gap="sm">
      <Title order={2}>Shares and quota of {tenantId}</Title>
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <ShareForm key={`share-${tenantId}`} tenantId={tenantId} />
        <QuotaForm key={`quota-${tenantId}`} tenantId={tenantId} />
      </SimpleGrid>
    </Stack>
  );
}
