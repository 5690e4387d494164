import { screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { seriousViolations } from "../../test/axe";
import { fakeFetch, renderPage } from "../../test/render";
import OverviewPage from "./OverviewPage";

afterEach(() => vi.unstubAllGlobals());

function figures(total: number, allocated: number, free: number, fragmented: number, unavailable: number) {
  return {
    total_units: String(total),
    allocated_units: String(allocated),
    free_units: String(free),
    fragmented_units: String(fragmented),
    unavailable_units: String(unavailable),
    total_gpus: total / 8,
    in_use_gpus: 1,
    free_gpus: 1,
    unavailable_gpus: 0,
    total_memory_mib: 0,
    allocated_memory_mib: 0,
    free_memory_mib: 0,
  };
}

const CAPACITY = {
  total: figures(32, 12, 16, 4, 4),
  by_pool: { default: figures(32, 12, 16, 4, 4) },
  by_model: { "A100-80GB": figures(24, 12, 8, 4, 4), L4: figures(8, 0, 8, 0, 0) },
  by_zone: { "zone-a": figures(32, 12, 16, 4, 4) },
};
const ALERTS = [
  {
    fingerprint: "f1",
    rule: "GpuMemoryHigh",
    severity: "critical",
    status: "firing",
    labels: { gpu: "GPU-1" },
    annotations: { summary: "GPU memory above 90% for 5 minutes" },
    starts_at: "2026-12-03T09:00:00Z",
    ends_at: null,
    tenant: "acme",
    value: 93,
  },
];
const INCIDENTS = [
  { incident_id: "inc-1", fault_type: "xid_79", node: "node-1", gpu: "GPU-1", state: "migrating", progress_percent: 40, detected_at: "2026-12-03T09:00:00Z" },
  { incident_id: "inc-0", fault_type: "ecc_dbe", node: "node-2", gpu: null, state: "resolved", progress_percent: null, detected_at: "2026-12-01T09:00:00Z" },
];

describe("the overview page", () => {
  it("shows capacity bars by pool, model and zone, firing alerts, incidents in progress and spend against budget", async () => {
    const fake = fakeFetch({
      "GET /inventory/v1/capacity": () => CAPACITY,
      "GET /alerting/v1/alerts": () => ALERTS,
      "GET /recovery/v1/incidents": () => INCIDENTS,
      "GET /billing/v1/costs": () => ({ group_by: "project", total_micro: 42_500_000, groups: [] }),
      "GET /billing/v1/budgets": () => [
        { tenant_id: "acme", project: "bert", limit_micro: 100_000_000, thresholds: [0.8], hard_stop: false, spent_micro: 42_500_000, crossed: [], month: "2026-12" },
      ],
    });
    vi.stubGlobal("fetch", fake.fn);
    const { container } = renderPage(<OverviewPage />);

    expect(screen.getByRole("heading", { level: 1, name: "Overview" })).toBeInTheDocument();
    expect(await screen.findByRole("progressbar", { name: "A100-80GB: allocated 12 of 24 units" })).toHaveAttribute("aria-valuenow", "50");
    expect(screen.getByRole("progressbar", { name: "A100-80GB: fragmented 4 of 24 units" })).toBeInTheDocument();
    expect(screen.getByRole("progressbar", { name: "A100-80GB: free 4 of 24 units" })).toBeInTheDocument();
    expect(screen.getByRole("progressbar", { name: "zone-a: unavailable 4 of 32 units" })).toBeInTheDocument();
    expect(screen.getByText("Allocated 12 · Free 4 · Fragmented 4 · Unavailable 4 compute units")).toBeInTheDocument();
    for (const title of ["By pool", "By model", "By zone"]) expect(screen.getByRole("heading", { name: title })).toBeInTheDocument();

    expect(within(await screen.findByRole("list", { name: "Firing alerts" })).getByText("GpuMemoryHigh")).toBeInTheDocument();
    const incidents = screen.getByRole("region", { name: "Incidents in progress" });
    expect(within(incidents).getByText("xid_79")).toBeInTheDocument();
    expect(within(incidents).queryByText("ecc_dbe")).toBeNull();
    expect(await screen.findByText(/Spent this month/)).toHaveTextContent("42.50 of 100.00 budgeted");

    const costs = fake.calls.find((c) => c.path === "/billing/v1/costs");
    expect(costs).toBeDefined();
    expect(await seriousViolations(container)).toEqual([]);
  });

  it("says so in words when nothing fires and nothing is broken", async () => {
    vi.stubGlobal(
      "fetch",
      fakeFetch({
        "GET /inventory/v1/capacity": () => ({ total: figures(8, 0, 8, 0, 0), by_pool: {}, by_model: {}, by_zone: {} }),
        "GET /alerting/v1/alerts": () => [],
        "GET /recovery/v1/incidents": () => [],
        "GET /billing/v1/costs": () => ({ group_by: "project", total_micro: 0, groups: [] }),
        "GET /billing/v1/budgets": () => [],
      }).fn,
    );
    renderPage(<OverviewPage />);
    expect(await screen.findByText("No alerts are firing.")).toBeInTheDocument();
    expect(await screen.findByText("No incidents in progress.")).toBeInTheDocument();
    expect(await screen.findByText(/no budget set/)).toBeInTheDocument();
  });
});
