import { QueryClientProvider, useQuery } from "@tanstack/react-query";
import { act, render, screen } from "@testing-library/react";
import { useState } from "react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { makeQueryClient } from "../app/Providers";
import { ALERTS_KEY, INCIDENTS_KEY } from "./keys";
import { LiveBadge } from "./LiveBadge";
import { LiveProvider, liveUrl, useLiveGpus } from "./LiveProvider";
import { LiveStore } from "./store";
import { fakeEventSources, sampleRow } from "./testing";
import { MantineProvider } from "@mantine/core";

function Shows({ gpus }: { gpus: string[] }) {
  useLiveGpus(gpus);
  return null;
}

function Harness({ store, sources }: { store: LiveStore; sources: ReturnType<typeof fakeEventSources> }) {
  const [a, setA] = useState(true);
  const [b, setB] = useState(true);
  return (
    <LiveProvider store={store} createEventSource={sources.create} debounceMs={150}>
      {a ? <Shows gpus={["gpu-a"]} /> : null}
      {b ? <Shows gpus={["gpu-b", "gpu-a"]} /> : null}
      <button onClick={() => setA(false)}>drop a</button>
      <button onClick={() => setB(false)}>drop b</button>
      <LiveBadge />
    </LiveProvider>
  );
}

function renderHarness() {
  const client = makeQueryClient();
  const store = new LiveStore({ capacity: 10 });
  const sources = fakeEventSources();
  render(
    <MantineProvider>
      <QueryClientProvider client={client}>
        <Harness store={store} sources={sources} />
      </QueryClientProvider>
    </MantineProvider>,
  );
  return { client, store, sources };
}

describe("LiveProvider", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("opens one stream with every GPU shown, after the debounce", () => {
    const { sources } = renderHarness();
    act(() => vi.advanceTimersByTime(200));
    expect(sources.open()).toHaveLength(1);
    expect(sources.latest().gpus).toEqual(["gpu-a", "gpu-b"]);
    expect(sources.latest().url).toBe("/api/live?alerts=1&incidents=1&gpus=gpu-a,gpu-b");
  });

  it("reopens without a GPU once nothing shows it, and keeps one shown twice", () => {
    const { sources } = renderHarness();
    act(() => vi.advanceTimersByTime(200));
    act(() => screen.getByRole("button", { name: "drop a" }).click());
    act(() => vi.advanceTimersByTime(200));
    expect(sources.latest().gpus).toEqual(["gpu-a", "gpu-b"]); // gpu-a is still shown by the other one
    act(() => screen.getByRole("button", { name: "drop b" }).click());
    act(() => vi.advanceTimersByTime(200));
    expect(sources.open()).toHaveLength(1);
    expect(sources.latest().gpus).toEqual([]);
    expect(sources.opened.slice(0, -1).every((s) => s.closed)).toBe(true);
  });

  it("writes samples into the GPUs' buffers and tells their listeners", () => {
    const { sources, store } = renderHarness();
    act(() => vi.advanceTimersByTime(200));
    const heard = vi.fn();
    store.subscribe("gpu-a", heard);
    act(() => sources.latest().emit("samples", { samples: [sampleRow("gpu-a", 100, { sm_util_pct: 71 }), sampleRow("gpu-b", 100)] }));
    act(() => sources.latest().emit("samples", { samples: [sampleRow("gpu-a", 101, { sm_util_pct: 72 })] }));
    expect(Array.from(store.buffer("gpu-a").column("sm_util_pct"))).toEqual([71, 72]);
    expect(store.buffer("gpu-b").length).toBe(1);
    expect(heard).toHaveBeenCalledTimes(2);
    expect(store.latestRow("gpu-a")?.workload_id).toBe("wl-1");
  });

  it("puts alerts and incidents events into the query cache under the pages' keys", () => {
    const { sources, client } = renderHarness();
    const alert = { fingerprint: "f1", rule: "GpuHot", status: "firing" };
    act(() => sources.latest().emit("alerts", { alerts: [alert] }));
    act(() => sources.latest().emit("incidents", { incidents: [{ incident_id: "i1" }] }));
    expect(client.getQueryData(ALERTS_KEY)).toEqual([alert]);
    expect(client.getQueryData(INCIDENTS_KEY)).toEqual([{ incident_id: "i1" }]);
  });

  it("shows the connection state in words", () => {
    const { sources } = renderHarness();
    expect(screen.getByRole("status")).toHaveTextContent("connecting");
    act(() => sources.latest().open());
    expect(screen.getByRole("status")).toHaveTextContent("live");
    act(() => sources.latest().fail());
    expect(screen.getByRole("status")).toHaveTextContent("reconnecting");
  });

  it("opens a new stream some seconds after the browser gives up", () => {
    const { sources } = renderHarness();
    act(() => vi.advanceTimersByTime(200));
    const first = sources.latest();
    act(() => first.fail(true));
    expect(screen.getByRole("status")).toHaveTextContent("offline");
    act(() => vi.advanceTimersByTime(5_000));
    expect(sources.latest()).not.toBe(first);
    expect(sources.open()).toHaveLength(1);
  });

  it("measures each samples event's handling", () => {
    vi.useRealTimers(); // fake timers replace `performance` too
    const { sources } = renderHarness();
    performance.clearMeasures("live-update");
    act(() => sources.latest().emit("samples", { samples: [sampleRow("gpu-a", 5)] }));
    return Promise.resolve().then(() => expect(performance.getEntriesByName("live-update").length).toBe(1));
  });
});

describe("liveUrl", () => {
  it("asks for alerts and incidents, and for samples only of the GPUs given", () => {
    expect(liveUrl([])).toBe("/api/live?alerts=1&incidents=1");
    expect(liveUrl(["b", "a"])).toBe("/api/live?alerts=1&incidents=1&gpus=a,b");
  });
});

// A page's REST hook and the live event meet in one cache entry.
describe("cache sharing", () => {
  it("a page reading the alerts key sees the live list", async () => {
    const client = makeQueryClient();
    const sources = fakeEventSources();
    function Page() {
      const alerts = useQuery({ queryKey: ALERTS_KEY, queryFn: () => new Promise<unknown[]>(() => undefined) });
      return <p>{alerts.data ? `${alerts.data.length} alerts` : "loading"}</p>;
    }
    render(
      <QueryClientProvider client={client}>
        <LiveProvider createEventSource={sources.create}>
          <Page />
        </LiveProvider>
      </QueryClientProvider>,
    );
    expect(screen.getByText("loading")).toBeInTheDocument();
    act(() => sources.latest().emit("alerts", { alerts: [{ fingerprint: "x" }, { fingerprint: "y" }] }));
    expect(await screen.findByText("2 alerts")).toBeInTheDocument();
  });
});
