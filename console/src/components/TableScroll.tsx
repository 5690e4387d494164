// A wide table's horizontal scroller that keyboard users can reach (axe: scrollable-region-focusable).
import { Table } from "@mantine/core";
import type { ReactNode } from "react";

export function TableScroll({ minWidth, children }: { minWidth: number; children: ReactNode }) {
  return (
    <Table.ScrollContainer minWidth={minWidth} scrollAreaProps={{ viewportProps: { tabIndex: 0 } }}>
      {children}
    </Table.ScrollContainer>
  );
}
