// What a page shows while a query loads or after it failed: a labelled Loader, or the service's message in an alert.
import { Alert, Loader } from "@mantine/core";
import type { ReactNode } from "react";
import { ApiError } from "../api/client";

/** The words to show for any thrown value: the service's own message where there is one. */
export function errorMessage(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return "The request failed.";
}

export function ErrorAlert({ error, title = "Request refused" }: { error: unknown; title?: string }) {
  if (!error) return null;
  return (
    <Alert color="red" role="alert" title={title}>
      {errorMessage(error)}
    </Alert>
  );
}

interface Pending {
  isPending: boolean;
  error: unknown;
}

/** Renders the loader or the error of `query`, else `children`. */
export function QueryStatus({ query, label, children }: { query: Pending; label: string; children: ReactNode }) {
  if (query.error) return <ErrorAlert error={query.error} title={`Could not load ${label}`} />;
  if (query.isPending) return <Loader aria-label={`Loading ${label}`} size="sm" />;
  return <>{children}</>;
}
