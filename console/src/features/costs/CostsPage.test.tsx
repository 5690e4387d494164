import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { seriousViolations } from "../../test/axe";
import { ADMIN, fakeFetch, renderPage } from "../../test/render";
import CostsPage, { windowOf } from "./CostsPage";
import { exportUrl } from "./queries";

const groupings: string[] = [];

function routes() {
  groupings.length = 0;
  const api = fakeFetch({
    "GET /billing/v1/costs": (_i, url) => {
      const groupBy = url.searchParams.get("group_by") ?? "";
      groupings.push(groupBy);
      if (groupBy.startsWith("tag:"))
        return { group_by: groupBy, total_micro: 3_000_000, groups: [{ key: "ml-platform", amount_micro: 3_000_000, compute_unit_hours: 2 }] };
      return {
        group_by: groupBy,
        total_micro: 15_500_000,
        groups: [
          { key: "vision", amount_micro: 12_000_000, compute_unit_hours: 10.5 },
          { key: "nlp", amount_micro: 3_500_000, compute_unit_hours: 3 },
        ],
      };
    },
    "GET /billing/v1/budgets": () => [
      { tenant_id: "acme", project: "vision", limit_micro: 20_000_000, thresholds: [50, 80, 100], hard_stop: true, spent_micro: 17_000_000, crossed: [50, 80], month: "2026-12" },
    ],
    "GET /billing/v1/idle/actions": () => [{ workload_id: "wl-7", tenant_id: "acme", stage: "warn", idle_hours: 48, at: "2026-12-03T08:00:00Z" }],
    "GET /billing/v1/spot-advice": () => ({
      tenant_id: "acme",
      window_days: 30,
      current_cost_micro: 100_000_000,
      saving_micro: 42_000_000,
      saving_pct: "42.0",
      advices: [{ workload_id: "wl-3", resource: "A100 x1", on_demand_micro: 100_000_000, spot_micro: 58_000_000, saving_micro: 42_000_000, saving_pct: "42.0" }],
    }),
  });
  vi.stubGlobal("fetch", api.fn);
  return api;
}

describe("CostsPage", () => {
  beforeEach(() => void vi.spyOn(HTMLCanvasElement.prototype, "getContext").mockReturnValue(null));

  it("shows costs by project, budgets as progress bars, idle notices and spot advice with the saving", async () => {
    routes();
    renderPage(<CostsPage />, { path: "/costs" });
    const table = await screen.findByRole("table", { name: "Costs by Project" });
    expect(within(table).getByText("vision").closest("tr")).toHaveTextContent("12.00");
    expect(within(table).getByText("Total").closest("tr")).toHaveTextContent("15.50");
    const bar = await screen.findByRole("progressbar", { name: "Budget of vision" });
    expect(bar).toHaveAttribute("aria-valuenow", "85");
    expect(screen.getByText("17.00 of 20.00 (85%) in 2026-12")).toBeInTheDocument();
    expect(screen.getByText(/Crossed 50%, 80%/)).toBeInTheDocument();
    expect(within(await screen.findByRole("list", { name: "Idle-reclaim notices" })).getByText(/Warned: wl-7 idle for 48 h/)).toBeInTheDocument();
    expect(await screen.findByText("42.00", { selector: "strong" })).toBeInTheDocument();
    expect(within(screen.getByRole("table", { name: "Spot advice" })).getByText("wl-3")).toBeInTheDocument();
    expect(await seriousViolations()).toEqual([]);
  });

  it("groups by any tag key", async () => {
    routes();
    renderPage(<CostsPage />, { path: "/costs" });
    const user = userEvent.setup();
    await screen.findByRole("table", { name: "Costs by Project" });
    await user.selectOptions(screen.getByLabelText("Group costs by"), "tag");
    await user.clear(screen.getByLabelText("Tag key"));
    await user.type(screen.getByLabelText("Tag key"), "cost-center");
    expect(await screen.findByRole("table", { name: "Costs by Tag cost-center" })).toHaveTextContent("ml-platform");
    expect(groupings).toContain("tag:cost-center");
    expect(groupings).not.toContain("tag:cost-"); // asked once typing paused, not per keystroke
  });

  it("links each project's export in CSV, JSON Lines and Parquet through the gateway", async () => {
    routes();
    renderPage(<CostsPage />, { path: "/costs" });
    const exports = await screen.findByRole("list", { name: "Exports" });
    const csv = within(exports).getByRole("link", { name: "Download vision as CSV" });
    const start = new Date();
    const month = `${start.getUTCFullYear()}-${String(start.getUTCMonth() + 1).padStart(2, "0")}-01T00:00:00Z`;
    expect(csv).toHaveAttribute("href", `/api/billing/v1/exports/vision?format=csv&start=${encodeURIComponent(month)}`);
    expect(csv).toHaveAttribute("download");
    expect(within(exports).getByRole("link", { name: "Download nlp as Parquet" }).getAttribute("href")).toMatch(/^\/api\/billing\/v1\/exports\/nlp\?format=parquet&/);
    expect(within(exports).getByRole("link", { name: "Download nlp as JSON Lines" }).getAttribute("href")).toContain("format=jsonl");
  });

  it("asks an admin to choose a tenant before spot advice and exports", async () => {
    const api = routes();
    renderPage(<CostsPage />, { path: "/costs", session: ADMIN });
    expect(await screen.findByText("Choose a tenant to see its spot advice.")).toBeInTheDocument();
    expect(api.calls.some((c) => c.path === "/billing/v1/spot-advice")).toBe(false);
    const user = userEvent.setup();
    await user.type(screen.getByLabelText(/^Tenant/), "acme");
    const link = await screen.findByRole("link", { name: "Download vision as CSV" });
    expect(link.getAttribute("href")).toContain("tenant_id=acme");
  });
});

describe("export helpers", () => {
  it("turns UTC days into the API's window, end exclusive", () => {
    expect(windowOf("2026-11-01", "2026-11-30")).toEqual({ start: "2026-11-01T00:00:00Z", end: "2026-12-01T00:00:00Z" });
    expect(windowOf("", "")).toEqual({});
  });

  it("escapes the project name in the export path", () => {
    expect(exportUrl("(untagged)", "csv", {}, null)).toBe("/api/billing/v1/exports/(untagged)?format=csv");
    expect(exportUrl("a b", "jsonl", { end: "2026-12-01T00:00:00Z" }, "t1")).toBe("/api/billing/v1/exports/a%20b?format=jsonl&end=2026-12-01T00%3A00%3A00Z&tenant_id=t1");
  });
});
