// The tenants table, the new-tenant form, and key issue/revoke; a new secret is shown once with a copy button.
import { Button, Group, Modal, Paper, Stack, Table, Text, TextInput, Title } from "@mantine/core";
import { useState, type FormEvent } from "react";
import { CopySecret } from "../../components/CopySecret";
import { ErrorAlert } from "../../components/QueryStatus";
import { TimeAgo } from "../../components/TimeAgo";
import { fieldError, namesField } from "./fieldError";
import { useCreateTenant, useIssueKey, useRevokeKey, type IssuedKey, type Tenant } from "./queries";

export function TenantTable(props: { tenants: Tenant[]; selected: string | null; onSelect: (id: string) => void; onIssued: (key: IssuedKey) => void }) {
  const { tenants, selected, onSelect, onIssued } = props;
  const issue = useIssueKey();
  if (tenants.length === 0) return <Text>No tenants yet.</Text>;
  return (
    <Stack gap="xs">
      <ErrorAlert error={issue.error} title="Key not issued" />
      <Table.ScrollContainer minWidth={640}>
        <Table aria-label="Tenants">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Tenant</Table.Th>
              <Table.Th>Name</Table.Th>
              <Table.Th>Created</Table.Th>
              <Table.Th>Actions</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {tenants.map((t) => (
              <Table.Tr key={t.tenant_id}>
                <Table.Td>{t.tenant_id}</Table.Td>
                <Table.Td>{t.name}</Table.Td>
                <Table.Td>
                  <TimeAgo at={t.created_at} />
                </Table.Td>
                <Table.Td>
                  <Group gap="xs" wrap="nowrap">
                    <Button
                      size="md" mih={44}
                      variant="light"
                      aria-label={`Issue key for ${t.tenant_id}`}
                      loading={issue.isPending && issue.variables === t.tenant_id}
                      onClick={() => issue.mutate(t.tenant_id, { onSuccess: onIssued })}
                    >
                      Issue key
                    </Button>
                    <Button size="md" mih={44} variant={selected === t.tenant_id ? "filled" : "default"} aria-pressed={selected === t.tenant_id} aria-label={`Shares and quota of ${t.tenant_id}`} onClick={() => onSelect(t.tenant_id)}>
                      Shares and quota
                    </Button>
                  </Group>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
    </Stack>
  );
}

export function NewTenantForm({ onCreated }: { onCreated: (key: IssuedKey) => void }) {
  const [tenantId, setTenantId] = useState("");
  const [name, setName] = useState("");
  const create = useCreateTenant();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate(
      { tenant_id: tenantId.trim(), name: name.trim() },
      {
        onSuccess: (created) => {
          onCreated(created.key);
          setTenantId("");
          setName("");
        },
      },
    );
  };
  return (
    <Paper withBorder p="md" component="form" onSubmit={submit} aria-label="New tenant">
      <Stack gap="xs">
        <Title order={3}>New tenant</Title>
        <Group align="flex-start" wrap="wrap">
          <TextInput
            label="Tenant ID"
            description="Lower-case letters, digits and dashes"
            value={tenantId}
            onChange={(e) => setTenantId(e.currentTarget.value)}
            error={fieldError(create.error, "tenant_id")}
            required
          />
          <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(create.error, "name")} required />
        </Group>
        {create.error && !namesField(create.error, ["tenant_id", "name"]) ? <ErrorAlert error={create.error} title="Tenant not created" /> : null}
        <Group>
          <Button type="submit" size="md" mih={44} loading={create.isPending}>
            Create tenant
          </Button>
        </Group>
      </Stack>
    </Paper>
  );
}

export function RevokeKeyForm() {
  const [keyId, setKeyId] = useState("");
  const [confirming, setConfirming] = useState(false);
  const [revoked, setRevoked] = useState<string | null>(null);
  const revoke = useRevokeKey();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setRevoked(null);
    revoke.reset();
    setConfirming(true);
  };
  const confirm = () =>
    revoke.mutate(keyId.trim(), {
      onSuccess: () => {
        setRevoked(keyId.trim());
        setKeyId("");
      },
      onSettled: () => setConfirming(false),
    });
  return (
    <Paper withBorder p="md" component="form" onSubmit={submit} aria-label="Revoke a key">
      <Stack gap="xs">
        <Title order={3}>Revoke a key</Title>
        <TextInput
          label="Key ID"
          value={keyId}
          onChange={(e) => setKeyId(e.currentTarget.value)}
          error={fieldError(revoke.error, "key_id")}
          required
        />
        {revoke.error && !namesField(revoke.error, ["key_id"]) ? <ErrorAlert error={revoke.error} title="Key not revoked" /> : null}
        {revoked ? (
          <Text role="status">Key {revoked} is revoked; calls with it are refused from now on.</Text>
        ) : null}
        <Group>
          <Button type="submit" size="md" mih={44} color="red" variant="light" disabled={keyId.trim() === ""}>
            Revoke key
          </Button>
        </Group>
        <Modal opened={confirming} onClose={() => setConfirming(false)} closeButtonProps={{ "aria-label": "Close" }} title={`Revoke key ${keyId.trim()}?`}>
          <Stack>
            <Text>Every call made with this key will be refused. This cannot be undone.</Text>
            <Group justify="flex-end">
              <Button size="md" mih={44} variant="default" onClick={() => setConfirming(false)}>
                Keep it
              </Button>
              <Button size="md" mih={44} color="red" loading={revoke.isPending} onClick={confirm}>
                Revoke
              </Button>
            </Group>
          </Stack>
        </Modal>
      </Stack>
    </Paper>
  );
}

export function IssuedSecret({ issued }: { issued: IssuedKey }) {
  return (
    <Stack gap="xs">
      <Text>
        Key {issued.key_id} issued for {issued.tenant_id ?? "admin"} ({issued.role}).
      </Text>
      <CopySecret label={`API key ${issued.key_id}`} secret={issued.api_key} />
    </Stack>
  );
}
