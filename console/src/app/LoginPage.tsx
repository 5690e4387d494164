import { Alert, Button, Container, Paper, PasswordInput, Stack, Text, Title } from "@mantine/core";
import { useState, type FormEvent } from "react";
import { ApiError } from "../api/client";
import { login, useSetSession } from "../api/session";

export function LoginPage() {
  const setSession = useSetSession();
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      setSession(await login(key.trim()));
    } catch (e) {
      setError(e instanceof ApiError ? e.message : "The gateway did not answer.");
    } finally {
      setBusy(false);
    }
  }

  return (
    <Container size={420} py="xl" component="main">
      <Title order={1} ta="center">
        gpucloud
      </Title>
      <Text c="dimmed" ta="center" mt={4}>
        Sign in with your API key
      </Text>
      <Paper withBorder shadow="sm" p="lg" mt="lg" radius="md" component="form" onSubmit={submit}>
        <Stack>
          <PasswordInput
            label="API key"
            description="A tenant or admin key issued by your platform team"
            value={key}
            onChange={(e) => setKey(e.currentTarget.value)}
            error={error}
            required
            autoComplete="current-password"
          />
          {error === null ? null : (
            <Alert color="red" role="alert" title="Sign-in refused">
              {error}
            </Alert>
          )}
          <Button type="submit" loading={busy} disabled={key.trim() === ""} size="md">
            Sign in
          </Button>
        </Stack>
      </Paper>
    </Container>
  );
}
