// A secret shown once, with a copy button and a warning that it cannot be shown again.
import { Alert, Button, Code, CopyButton, Group, Stack, Text } from "@mantine/core";

export function CopySecret({ label, secret }: { label: string; secret: string }) {
  return (
    <Alert color="blue" title={label} role="status">
      <Stack gap="xs">
        <Text size="sm">Store it now: it is shown this once and cannot be retrieved later.</Text>
        <Group gap="xs" wrap="wrap">
          <Code aria-label={label} style={{ wordBreak: "break-all" }}>
            {secret}
          </Code>
          <CopyButton value={secret}>
            {({ copied, copy }) => (
              <Button size="md" mih={44} variant="light" onClick={copy}>
                {copied ? "Copied" : "Copy"}
              </Button>
            )}
          </CopyButton>
        </Group>
      </Stack>
    </Alert>
  );
}
