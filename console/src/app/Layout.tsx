import { AppShell, Badge, Burger, Button, Group, NavLink, ScrollArea, Text } from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import type { ReactNode } from "react";
import { Link, useLocation } from "react-router-dom";
import { logout, useSession, useSetSession } from "../api/session";
import { LiveBadge } from "../live/LiveBadge";

interface Page {
  to: string;
  label: string;
  admin?: boolean;
}

export const PAGES: Page[] = [
  { to: "/", label: "Overview" },
  { to: "/create", label: "Create" },
  { to: "/describe", label: "Describe what you need" },
  { to: "/workloads", label: "Workloads" },
  { to: "/gpus", label: "GPUs" },
  { to: "/alerts", label: "Alerts" },
  { to: "/recovery", label: "Recovery" },
  { to: "/costs", label: "Costs" },
  { to: "/admin", label: "Admin", admin: true },
];

export function Layout({ children }: { children: ReactNode }) {
  const [opened, { toggle, close }] = useDisclosure();
  const session = useSession();
  const setSession = useSetSession();
  const { pathname } = useLocation();
  const active = (to: string) => (to === "/" ? pathname === "/" : pathname.startsWith(to));

  return (
    <AppShell header={{ height: 56 }} navbar={{ width: 230, breakpoint: "sm", collapsed: { mobile: !opened } }} padding="md">
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="md" w={44} h={44} aria-label="Toggle navigation" />
            <Text fw={700} component={Link} to="/" aria-label="gpucloud home" mih={44} miw={44} style={{ display: "flex", alignItems: "center" }}>
              gpucloud
            </Text>
          </Group>
          <Group gap="xs" wrap="nowrap">
            <LiveBadge />
            <Badge variant="light" visibleFrom="xs">
              {session.role === "admin" ? "admin" : session.tenant_id}
            </Badge>
            <Button
              variant="subtle"
              size="sm"
              mih={44}
              onClick={async () => {
                await logout().catch(() => undefined);
                setSession(null);
              }}
            >
              Sign out
            </Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Pages">
        <ScrollArea>
          {PAGES.filter((p) => !p.admin || session.role === "admin").map((page) => (
            <NavLink
              key={page.to}
              component={Link}
              to={page.to}
              label={page.label}
              active={active(page.to)}
              aria-current={active(page.to) ? "page" : undefined}
              onClick={close}
              mih={44}
            />
          ))}
        </ScrollArea>
      </AppShell.Navbar>
      <AppShell.Main>{children}</AppShell.Main>
    </AppShell>
  );
}
