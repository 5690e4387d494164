import { createTheme, MantineProvider, type CSSVariablesResolver } from "@mantine/core";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { useState, type ReactNode } from "react";
import { ApiError } from "../api/client";

const theme = createTheme({
  primaryColor: "blue",
  // Touch targets: the default control height is 36 px; the mobile view needs 44 px (see app/Layout).
  defaultRadius: "sm",
  // WCAG AA contrast (4.5:1) for text on filled, light and subtle controls: Mantine's default shade 6 is ~3.5:1.
  primaryShade: 8,
});

// Mantine's dimmed text (descriptions, step captions) is gray 6, ~3.3:1 on white, and its light variants
// (light buttons, badges, alerts) colour text with shade 6 too; gray 7 and shade 9 pass AA.
const resolver: CSSVariablesResolver = (t) => ({
  variables: {},
  light: {
    "--mantine-color-dimmed": t.colors.gray[7],
    ...Object.fromEntries(Object.entries(t.colors).map(([name, shades]) => [`--mantine-color-${name}-light-color`, shades[9]])),
  },
  dark: {},
});

export function makeQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        staleTime: 5_000,
        refetchOnWindowFocus: true,
        // A refusal (4xx) will not change by asking again.
        retry: (count, error) => !(error instanceof ApiError && error.status < 500) && count < 2,
      },
    },
  });
}

export function Providers({ children, client }: { children: ReactNode; client?: QueryClient }) {
  const [queries] = useState(() => client ?? makeQueryClient());
  return (
    <MantineProvider theme={theme} cssVariablesResolver={resolver}>
      <QueryClientProvider client={queries}>{children}</QueryClientProvider>
    </MantineProvider>
  );
}
