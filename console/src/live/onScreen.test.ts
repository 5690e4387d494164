import { afterEach, describe, expect, it, vi } from "vitest";

describe("watchOnScreen", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.resetModules();
  });

  it("tells each element's watcher when it enters and leaves the screen, through one shared observer", async () => {
    const made: FakeObserver[] = [];
    class FakeObserver {
      observed = new Set<Element>();
      constructor(readonly callback: (entries: { target: Element; isIntersecting: boolean }[]) => void) {
        made.push(this);
      }
      observe(element: Element) {
        this.observed.add(element);
      }
      unobserve(element: Element) {
        this.observed.delete(element);
      }
    }
    vi.stubGlobal("IntersectionObserver", FakeObserver);
    const { watchOnScreen } = await import("./onScreen");
    const [a, b] = [document.createElement("span"), document.createElement("span")];
    const seenA: boolean[] = [];
    const seenB: boolean[] = [];
    const stopA = watchOnScreen(a, (v) => seenA.push(v));
    watchOnScreen(b, (v) => seenB.push(v));
    expect(made).toHaveLength(1);
    made[0].callback([{ target: a, isIntersecting: false }, { target: b, isIntersecting: true }]);
    expect(seenA).toEqual([false]);
    expect(seenB).toEqual([true]);
    stopA();
    expect(made[0].observed.has(a)).toBe(false);
    made[0].callback([{ target: a, isIntersecting: true }]);
    expect(seenA).toEqual([false]);
  });

  it("observes a live row once for every value inside it, and tells a late watcher the row's visibility", async () => {
    const made: { observed: Element[]; callback: (e: { target: Element; isIntersecting: boolean }[]) => void }[] = [];
    vi.stubGlobal(
      "IntersectionObserver",
      class {
        observed: Element[] = [];
        constructor(readonly callback: (e: { target: Element; isIntersecting: boolean }[]) => void) {
          made.push(this);
        }
        observe(element: Element) {
          this.observed.push(element);
        }
        unobserve(element: Element) {
          this.observed = this.observed.filter((e) => e !== element);
        }
      },
    );
    const { LIVE_ROW, watchOnScreen } = await import("./onScreen");
    const row = document.createElement("tr");
    row.setAttribute(LIVE_ROW, "");
    const [a, b] = [document.createElement("span"), document.createElement("span")];
    row.append(a, b);
    const seenA: boolean[] = [];
    const seenB: boolean[] = [];
    const stopA = watchOnScreen(a, (v) => seenA.push(v));
    made[0].callback([{ target: row, isIntersecting: false }]);
    const stopB = watchOnScreen(b, (v) => seenB.push(v));
    expect(made[0].observed).toEqual([row]);
    expect(seenA).toEqual([false]);
    expect(seenB).toEqual([false]);
    stopA();
    expect(made[0].observed).toEqual([row]);
    stopB();
    expect(made[0].observed).toEqual([]);
  });

  it("counts an element as visible where there is no IntersectionObserver", async () => {
    vi.stubGlobal("IntersectionObserver", undefined);
    const { watchOnScreen } = await import("./onScreen");
    const seen: boolean[] = [];
    watchOnScreen(document.createElement("span"), (v) => seen.push(v));
    expect(seen).toEqual([true]);
  });
});

describe("writeText", () => {
  it("writes only a changed text, keeping the text node otherwise", async () => {
    const { writeText } = await import("./onScreen");
    const span = document.createElement("span");
    span.textContent = "41%";
    const node = span.firstChild;
    writeText(span, "41%");
    expect(span.firstChild).toBe(node);
    writeText(span, "42%");
    expect(span.textContent).toBe("42%");
  });
});
