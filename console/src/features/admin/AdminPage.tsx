// Admin (admin keys only): tenants, keys (issue, revoke), shares and quotas. A tenant session sees a refusal and
// makes no admin call.
import { Paper, SimpleGrid, Stack, Text, Title } from "@mantine/core";
import { useState } from "react";
import { useSession } from "../../api/session";
import { QueryStatus } from "../../components/QueryStatus";
import { useTenants, type IssuedKey } from "./queries";
import { ShareQuota } from "./ShareQuota";
import { IssuedSecret, NewTenantForm, RevokeKeyForm, TenantTable } from "./Tenants";

function Refused() {
  return (
    <Stack>
      <Title order={1}>This page needs an admin key</Title>
      <Text>You are signed in with a tenant key. Sign in with an admin key to manage tenants, keys, shares and quotas.</Text>
    </Stack>
  );
}

function Admin() {
  const tenants = useTenants();
  const [selected, setSelected] = useState<string | null>(null);
  const [issued, setIssued] = useState<IssuedKey | null>(null);
  return (
    <Stack>
      <Title order={1}>Admin</Title>
      <Paper withBorder p="md" component="section" aria-label="Tenants and keys">
        <Stack gap="sm">
          <Title order={2}>Tenants and keys</Title>
          {issued ? <IssuedSecret issued={issued} /> : null}
          <QueryStatus query={tenants} label="tenants">
            <TenantTable tenants={tenants.data ?? []} selected={selected} onSelect={setSelected} onIssued={setIssued} />
          </QueryStatus>
          <SimpleGrid cols={{ base: 1, md: 2 }}>
            <NewTenantForm onCreated={setIssued} />
            <RevokeKeyForm />
          </SimpleGrid>
        </Stack>
      </Paper>
      {selected ? <ShareQuota tenantId={selected} /> : <Text>Pick a tenant’s “Shares and quota” to see and change them.</Text>}
    </Stack>
  );
}

export default function AdminPage() {
  const session = useSession();
  return session.role === "admin" ? <Admin /> : <Refused />;
}
