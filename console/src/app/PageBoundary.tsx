import { Alert, Button, Stack, Title } from "@mantine/core";
import { Component, type ReactNode } from "react";

interface State {
  error: Error | null;
}

/** A page that throws while rendering shows what broke, not a blank screen; the rest of the app stays. */
export class PageBoundary extends Component<{ children: ReactNode; page: string }, State> {
  state: State = { error: null };

  static getDerivedStateFromError(error: Error): State {
    return { error };
  }

  componentDidUpdate(previous: { page: string }) {
    if (previous.page !== this.props.page && this.state.error) this.setState({ error: null });
  }

  render() {
    if (!this.state.error) return this.props.children;
    return (
      <Stack>
        <Title order={1}>This page failed</Title>
        <Alert color="red" role="alert" title="Something went wrong while showing this page">
          {this.state.error.message}
        </Alert>
        <Button onClick={() => window.location.reload()} w="fit-content" mih={44}>
          Reload
        </Button>
      </Stack>
    );
  }
}
