import { act, screen, within } from "@testing-library/react";
import { Route, Routes } from "react-router-dom";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { LiveProvider } from "../../live/LiveProvider";
import { fakeEventSources, sampleRow } from "../../live/testing";
import { seriousViolations } from "../../test/axe";
import { ADMIN, fakeFetch, renderPage } from "../../test/render";
import GpuDetailPage from "./GpuDetailPage";
import GpusPage from "./GpusPage";
import { charts, noCanvas } from "./testing";

vi.mock("uplot", async () => ({ default: (await import("./testing")).FakeUPlot }));

const GPU_A = "GPU-aaaa";
const GPU_B = "GPU-bbbb";
const inventoryGpu = (uuid: string, index: number, health = "healthy") => ({
  uuid,
  node: "node-a",
  index,
  model: "A100-SXM4-80GB",
  pool: "train",
  zone: "z1",
  region: "r1",
  health,
  memory_mib: 81920,
  mig_enabled: false,
  units: "8",
  capacity_units: "8",
  nvlink_peers: [],
  pci_bus_id: "0000:01:00.0",
  time_slice: null,
});
const latest = (uuid: string, index: number, fields: Record<string, unknown> = {}) => ({
  ...sampleRow(uuid, "2026-12-03T10:00:00Z", { index, ...fields }),
  fb_used_percent: 50,
});

/** Answers the GPU page's queries with `size` reporting GPUs (no inventory); returns their UUIDs in order. */
function stubFleet(size: number): string[] {
  const fleet = Array.from({ length: size }, (_, i) => `GPU-${String(i).padStart(4, "0")}`);
  vi.stubGlobal(
    "fetch",
    fakeFetch({
      "GET /telemetry/v1/gpus/latest": () => fleet.map((uuid, i) => latest(uuid, i)),
      "GET /inventory/v1/gpus": () => [],
    }).fn,
  );
  return fleet;
}

function live() {
  const sources = fakeEventSources();
  const wrap = (ui: React.ReactElement) => (
    <LiveProvider createEventSource={sources.create} debounceMs={0}>
      {ui}
    </LiveProvider>
  );
  return { sources, wrap };
}

beforeEach(() => {
  noCanvas();
  charts.length = 0;
});

describe("GpusPage", () => {
  it("lists the GPUs the caller sees with health, workload and a link to each", async () => {
    const api = fakeFetch({
      "GET /telemetry/v1/gpus/latest": () => [latest(GPU_A, 0), latest(GPU_B, 1, { workload_id: null, tenant_id: null })],
      "GET /inventory/v1/gpus": () => [inventoryGpu(GPU_A, 0), inventoryGpu(GPU_B, 1, "degraded"), inventoryGpu("GPU-cccc", 2)],
    });
    vi.stubGlobal("fetch", api.fn);
    const { wrap } = live();
    renderPage(wrap(<GpusPage />), { path: "/gpus" });

    const table = await screen.findByRole("table", { name: "GPUs" });
    const rows = within(table).getAllByRole("row");
    expect(rows).toHaveLength(3); // header + the tenant's two GPUs, not the third inventory GPU
    expect(within(rows[1]).getByRole("link", { name: "A100-SXM4-80GB #0 on node-a" })).toHaveAttribute("href", `/gpus/${GPU_A}`);
    expect(within(rows[1]).getByText("wl-1")).toBeInTheDocument();
    expect(within(rows[2]).getByText("degraded")).toBeInTheDocument();
    expect(within(rows[2]).getByText("idle")).toBeInTheDocument();
    expect(await seriousViolations()).toEqual([]);
  });

  it("shows admins the GPUs that have not reported too", async () => {
    vi.stubGlobal(
      "fetch",
      fakeFetch({
        "GET /telemetry/v1/gpus/latest": () => [latest(GPU_A, 0)],
        "GET /inventory/v1/gpus": () => [inventoryGpu(GPU_A, 0), inventoryGpu("GPU-cccc", 2, "failed")],
      }).fn,
    );
    const { wrap } = live();
    renderPage(wrap(<GpusPage />), { path: "/gpus", session: ADMIN });
    const row = (await screen.findByRole("link", { name: "A100-SXM4-80GB #2 on node-a" })).closest("tr")!;
    expect(within(row).getByText("failed")).toBeInTheDocument();
    expect(within(row).getAllByText("not reporting").length).toBeGreaterThan(0);
  });

  it("streams exactly the listed GPUs and updates their sparklines from samples", async () => {
    vi.stubGlobal(
      "fetch",
      fakeFetch({
        "GET /telemetry/v1/gpus/latest": () => [latest(GPU_A, 0), latest(GPU_B, 1)],
        "GET /inventory/v1/gpus": () => [],
      }).fn,
    );
    const { sources, wrap } = live();
    renderPage(wrap(<GpusPage />), { path: "/gpus" });
    await screen.findByRole("table", { name: "GPUs" });
    await vi.waitFor(() => expect(sources.latest().gpus).toEqual([GPU_A, GPU_B]));
    expect(sources.open()).toHaveLength(1);

    act(() => sources.latest().emit("samples", { samples: [sampleRow(GPU_A, 1000, { sm_util_pct: 71, gpu_temp_c: 64 })] }));
    act(() => sources.latest().emit("samples", { samples: [sampleRow(GPU_A, 1001, { sm_util_pct: 73, gpu_temp_c: 65 })] }));
    const spark = screen.getByRole("img", { name: /^Compute utilisation of A100-SXM4-80GB #0 on node-a/ });
    expect(spark).toHaveAttribute("aria-label", "Compute utilisation of A100-SXM4-80GB #0 on node-a: 2 points, latest 73%");
    const row = spark.closest("tr")!;
    expect(within(row).getByText("73%")).toBeInTheDocument();
    expect(within(row).getByText("65 °C")).toBeInTheDocument();
  });

  it("renders and streams only the rows near the view of a fleet longer than the stream's 256 GPUs", async () => {
    const fleet = stubFleet(400);
    const { sources, wrap } = live();
    renderPage(wrap(<GpusPage />), { path: "/gpus" });
    const table = await screen.findByRole("table", { name: "GPUs" });
    expect(table).toHaveAttribute("aria-rowcount", "401");
    const rows = within(table).getAllByRole("row").slice(1);
    expect(rows.length).toBeGreaterThan(5);
    expect(rows.length).toBeLessThan(60);
    expect(rows[0]).toHaveAttribute("aria-rowindex", "2");
    expect(within(table).queryByRole("link", { name: "A100-SXM4-80GB #399 on node-a" })).toBeNull();
    // The stream follows the rendered rows, not the fleet (which it would refuse: at most 256 GPUs).
    await vi.waitFor(() => expect(sources.latest().gpus).toEqual(fleet.slice(0, rows.length)));
  });

  it("keeps each rendered row's stripe with the window scrolled down the list", async () => {
    stubFleet(400);
    // jsdom has no layout: the list's body sits 200 px down the page, which the window scrolls past.
    const rect = vi.spyOn(HTMLElement.prototype, "getBoundingClientRect").mockImplementation(
      () => ({ top: 200 - window.scrollY, bottom: 0, left: 0, right: 0, width: 0, height: 0, x: 0, y: 0 }) as DOMRect,
    );
    for (const offset of [5000, 5057]) {
      Object.defineProperty(window, "scrollY", { value: offset, configurable: true });
      try {
        const { unmount } = renderPage(live().wrap(<GpusPage />), { path: "/gpus" });
        const table = await screen.findByRole("table", { name: "GPUs" });
        act(() => void window.dispatchEvent(new Event("scroll")));
        await vi.waitFor(() =>
          // A window down the list.
          expect(Number(within(table).getAllByRole("row")[1].getAttribute("aria-rowindex"))).toBeGreaterThan(50),
        );
        const rows = within(table).getAllByRole("row").slice(1);
        for (const row of rows) {
          // Row n of the list (aria-rowindex n + 1) is striped as the nth row of the body.
          const n = Number(row.getAttribute("aria-rowindex")) - 1;
          expect(row.matches(":nth-of-type(odd)")).toBe(n % 2 === 1);
        }
        unmount();
      } finally {
        Object.defineProperty(window, "scrollY", { value: 0, configurable: true });
      }
    }
    rect.mockRestore();
  });

  it("says so when the caller holds no GPU", async () => {
    vi.stubGlobal("fetch", fakeFetch({ "GET /telemetry/v1/gpus/latest": () => [], "GET /inventory/v1/gpus": () => [] }).fn);
    renderPage(live().wrap(<GpusPage />), { path: "/gpus" });
    expect(await screen.findByText("None of your workloads holds a GPU right now.")).toBeInTheDocument();
  });
});

describe("GpuDetailPage", () => {
  const rule = (name: string, threshold: number, matchers: unknown[] = []) => ({
    name,
    kind: "threshold",
    metric: "gpu_temp_c",
    comparator: ">",
    threshold,
    for: "2m",
    matchers,
    severity: "warning",
    summary: "",
    group: "default",
    mode: "stream",
    labels: {},
    annotations: {},
    bit: null,
    expr: null,
    interval: null,
    keep_firing_for: null,
    owner_tenant: null,
    runbook_url: null,
    window: null,
  });

  function route() {
    const api = fakeFetch({
      [`GET /inventory/v1/gpus/${GPU_A}`]: () => ({ ...inventoryGpu(GPU_A, 0), allocations: [], partitions: [], health_history: [], capacity: {} }),
      [`GET /telemetry/v1/gpus/${GPU_A}/latest`]: () => latest(GPU_A, 0, { at: "2026-12-03T10:05:00Z", pcie_tx_bytes_per_s: 2e9 }),
      [`GET /telemetry/v1/gpus/${GPU_A}/history`]: () => [
        { window_start: "2026-12-03T10:03:00Z", window_s: 60, node: "node-a", model: "A100", samples: 60, workload_id: "wl-1", tenant_id: "acme", stats: { sm_util_pct: { avg: 40, max: 50, p95: 48 } } },
        { window_start: "2026-12-03T10:04:00Z", window_s: 60, node: "node-a", model: "A100", samples: 60, workload_id: "wl-1", tenant_id: "acme", stats: { sm_util_pct: { avg: 45, max: 50, p95: 48 } } },
      ],
      "GET /alerting/v1/rules": () => [rule("GpuHot", 85), rule("GpuHotElsewhere", 70, [{ name: "node", op: "=", value: "node-z" }])],
    });
    vi.stubGlobal("fetch", api.fn);
    return api;
  }

  function renderDetail() {
    const { sources, wrap } = live();
    renderPage(
      wrap(
        <Routes>
          <Route path="/gpus/:uuid" element={<GpuDetailPage />} />
        </Routes>,
      ),
      { path: `/gpus/${GPU_A}` },
    );
    return sources;
  }

  it("charts history then live points, with the count and latest value in each chart's label", async () => {
    const api = route();
    const sources = renderDetail();
    expect(await screen.findByRole("heading", { level: 1, name: "A100-SXM4-80GB #0 on node-a" })).toBeInTheDocument();
    const compute = screen.getByRole("img", { name: /^Compute and memory utilisation:/ });
    await vi.waitFor(() => expect(compute).toHaveAttribute("aria-label", "Compute and memory utilisation: 3 points, latest 50%"));
    const history = api.calls.find((c) => c.path.endsWith("/history"));
    expect(history).toBeDefined();

    await vi.waitFor(() => expect(sources.latest().gpus).toEqual([GPU_A]));
    act(() => sources.latest().emit("samples", { samples: [sampleRow(GPU_A, "2026-12-03T10:05:01Z", { sm_util_pct: 88 })] }));
    expect(compute).toHaveAttribute("aria-label", "Compute and memory utilisation: 4 points, latest 88%");
    expect(screen.getAllByText(/^Latest: 88%/).length).toBe(1);
    // The charts were given the new points through setData (no React render).
    const last = charts.flatMap((c) => c.data).at(-1) as Float64Array[];
    expect(last[0].length).toBe(4);
    expect(await seriousViolations()).toEqual([]);
  });

  it("draws the temperature threshold of the rule that applies, and names it", async () => {
    route();
    renderDetail();
    expect(await screen.findByText(/Threshold from alert rule "GpuHot": fires when gpu_temp_c > 85 for 2m/)).toBeInTheDocument();
    expect(screen.getByText(/Alert threshold 85 °C \(rule GpuHot\)/)).toBeInTheDocument();
  });

  it("says which fields the GPU does not report instead of drawing them", async () => {
    route();
    renderDetail();
    await screen.findByRole("img", { name: /^Transfer \(PCIe\):/ });
    expect(await screen.findByText("PCIe receive: not reported by this GPU.")).toBeInTheDocument();
    expect(screen.getByText(/NVLink throughput is not sampled/)).toBeInTheDocument();
  });

  it("shows the workload on the GPU and its counters", async () => {
    route();
    renderDetail();
    expect(await screen.findByText(/Workload on it: wl-1/)).toBeInTheDocument();
    expect(screen.getByText("XID errors").nextElementSibling).toHaveTextContent("0");
  });
});
