// A long list that renders only the rows near the window's view (TanStack Virtual), the page scrolling as usual.
// The admin's GPU list is the fleet: thousands of rows would each mount live values and join the stream (which
// follows at most 256 GPUs), and every frame's paint, commit and hit test grows with what is in the document. A
// row off screen is not mounted, so it neither joins the stream nor costs a frame anything; a row scrolled in
// mounts and joins the stream at once.
import { measureElement, useWindowVirtualizer, type VirtualItem } from "@tanstack/react-virtual";
import { useCallback, useLayoutEffect, useRef, useState } from "react";

/** Rows rendered beyond each edge of the view, so a scroll of a screen's height shows rows already drawn. */
const OVERSCAN = 6;

export interface WindowRows {
  /** Attach to the list's element (its offset in the page places the rows). */
  listRef: (element: HTMLElement | null) => void;
  /** The rows to render, with their index into the list. */
  items: VirtualItem[];
  /** Pixels of list above the first rendered row and below the last (spacers keep the scrollbar true). */
  before: number;
  after: number;
  /** Attach to each rendered row (with `data-index`), so its real height replaces the estimate. */
  measure: (element: Element | null) => void;
}

export function useWindowRows(count: number, estimate: number): WindowRows {
  const list = useRef<HTMLElement | null>(null);
  const [margin, setMargin] = useState(0);
  const virtualizer = useWindowVirtualizer({
    count,
    estimateSize: () => estimate,
    // A row not laid out (jsdom; a hidden list) measures 0 and would make every row fit: it keeps the estimate.
    measureElement: (element, entry, instance) => measureElement(element, entry, instance) || estimate,
    overscan: OVERSCAN,
    scrollMargin: margin,
    // Where the window is now: the virtualizer scrolls to its offset when it attaches, and a list mounted below
    // the fold (a phone turned, a refetch) must not send the reader back to the top.
    initialOffset: () => window.scrollY,
    // Before the first measurement (and in jsdom, which has no layout) a 1280×800 window.
    initialRect: { width: 1280, height: 800 },
  });
  useLayoutEffect(() => {
    const top = list.current ? list.current.getBoundingClientRect().top + window.scrollY : 0;
    if (Math.abs(top - margin) >= 1) setMargin(top);
  });
  const listRef = useCallback((element: HTMLElement | null) => {
    list.current = element;
  }, []);
  const items = virtualizer.getVirtualItems();
  const total = virtualizer.getTotalSize();
  const before = items.length > 0 ? items[0].start - margin : 0;
  const after = items.length > 0 ? total - (items[items.length - 1].end - margin) : 0;
  return { listRef, items, before: Math.max(0, before), after: Math.max(0, after), measure: virtualizer.measureElement };
}
