// Whether an element is on screen, from one IntersectionObserver shared by every live value and sparkline. A
// live element off screen skips its DOM writes: 256 values rewritten every second cost a layout of the whole
// table; the dozen rows in view cost a fraction of it. Inside a `data-live-row` element (a list's row) the row
// is what is observed, once for all its values: the observer's work each frame grows with its targets.

type Watch = (visible: boolean) => void;

/** The attribute that makes an element (a list's row) the one observed for the live values inside it. */
export const LIVE_ROW = "data-live-row";

const watches = new WeakMap<Element, Set<Watch>>();
const seen = new WeakMap<Element, boolean>();
let observer: IntersectionObserver | null = null;

function shared(): IntersectionObserver | null {
  if (typeof IntersectionObserver === "undefined") return null;
  observer ??= new IntersectionObserver((entries) => {
    for (const entry of entries) {
      seen.set(entry.target, entry.isIntersecting);
      watches.get(entry.target)?.forEach((watch) => watch(entry.isIntersecting));
    }
  });
  return observer;
}

/**
 * Calls `watch` with the element's visibility now and whenever it changes; returns the stop. Where the
 * browser has no IntersectionObserver (jsdom) the element counts as always visible.
 */
export function watchOnScreen(element: Element, watch: Watch): () => void {
  const io = shared();
  if (!io) {
    watch(true);
    return () => {};
  }
  const target = element.closest(`[${LIVE_ROW}]`) ?? element;
  let set = watches.get(target);
  if (!set) {
    watches.set(target, (set = new Set()));
    io.observe(target);
  } else if (seen.has(target)) watch(seen.get(target)!);
  set.add(watch);
  return () => {
    set.delete(watch);
    if (set.size === 0) {
      io.unobserve(target);
      watches.delete(target);
      seen.delete(target);
    }
  };
}

/** Sets a text node's text only when it differs (an unchanged value costs no layout). */
export function writeText(element: Element, text: string): void {
  if (element.textContent !== text) element.textContent = text;
}
