// A page's section under its own heading (h2 styled h3), named by it for assistive technology.
import { Title } from "@mantine/core";
import type { ReactNode } from "react";

export function PageSection({ id, title, children }: { id: string; title: ReactNode; children: ReactNode }) {
  return (
    <section aria-labelledby={id}>
      <Title order={2} id={id} size="h3" mb="sm">
        {title}
      </Title>
      {children}
    </section>
  );
}
