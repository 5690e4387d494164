import { act, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { LiveProvider } from "../../live/LiveProvider";
import { fakeEventSources } from "../../live/testing";
import { seriousViolations } from "../../test/axe";
import { fakeFetch, renderPage } from "../../test/render";
import RecoveryPage from "./RecoveryPage";

const summary = (id: string, fields: Record<string, unknown> = {}) => ({
  incident_id: id,
  action: "drain_and_reset",
  closed_at: null,
  count: 1,
  detected_at: "2026-12-03T10:00:02Z",
  escalation_reason: null,
  fault_at: "2026-12-03T10:00:00Z",
  fault_type: "xid_79",
  gpu: "GPU-a",
  node: "node-a",
  owner: "hardware",
  progress_percent: 40,
  recoverable: true,
  recovered_at: null,
  repeat_of: null,
  severity: "critical",
  state: "migrating",
  ...fields,
});
const detail = {
  ...summary("inc-1"),
  diagnosis: {
    probable_cause: "gpu_fell_off_bus",
    confidence: 0.9,
    findings: [{ rule: "xid_79_seen", cause: "gpu_fell_off_bus", confidence: 0.9, evidence: { xid: 79, pcie_replay: 12 } }],
  },
  history: [
    { at: "2026-12-03T10:00:02Z", state: "detected", reason: "" },
    { at: "2026-12-03T10:00:03Z", state: "migrating", reason: "drained" },
  ],
  migrations: [{ workload_id: "wl-1", phase: "transfer", percent: 40, note: "", restored: null }],
};
const stats = { incidents: 12, measured: 10, recovered: 9, share_within_3m: 0.92, share_within_1m: 0.5, recover_p50_s: 75, recover_p99_s: 170, detect_p50_s: 1.5, detect_p99_s: 4 };
const slo = (period: string) => ({ as_of: "2026-12-03T11:00:00Z", since: "2026-12-02T11:00:00Z", period, fault_type: null, overall: stats, by_fault_type: {} });

const periods: string[] = [];

function routes() {
  periods.length = 0;
  const api = fakeFetch({
    "GET /recovery/v1/incidents": () => [summary("inc-1"), summary("inc-0", { state: "resolved", progress_percent: 100, fault_type: "gpu_lost" })],
    "GET /recovery/v1/incidents/inc-1": () => detail,
    "GET /recovery/v1/stats/slo": (_i, url) => {
      periods.push(url.searchParams.get("period") ?? "(none)");
      return slo(periods[periods.length - 1]);
    },
    "GET /recovery/v1/catalog/faults": () => ({
      faults: [{ key: "xid_79", description: "GPU has fallen off the bus", severity: "fatal", action: "drain_and_reset", owner: "hardware", recoverable: true, source: "nvidia", note: "" }],
      sources: { nvidia: "https://docs.nvidia.com" },
    }),
  });
  vi.stubGlobal("fetch", api.fn);
  return api;
}

function render() {
  const sources = fakeEventSources();
  renderPage(
    <LiveProvider createEventSource={sources.create}>
      <RecoveryPage />
    </LiveProvider>,
    { path: "/recovery" },
  );
  return sources;
}

describe("RecoveryPage", () => {
  beforeEach(() => void vi.spyOn(HTMLCanvasElement.prototype, "getContext").mockReturnValue(null));

  it("lists incidents with their migration progress and state in words, and the SLO figures", async () => {
    routes();
    render();
    const list = await screen.findByRole("list", { name: "Incidents" });
    const items = within(list).getAllByRole("listitem");
    expect(within(items[0]).getByText("migrating")).toBeInTheDocument();
    expect(within(items[0]).getByText(/GPU has fallen off the bus/)).toBeInTheDocument();
    const bar = within(items[0]).getByRole("progressbar", { name: "Migration progress of incident inc-1" });
    expect(bar).toHaveAttribute("aria-valuenow", "40");
    expect(within(items[1]).getByText("resolved")).toBeInTheDocument();
    expect(await screen.findByText("92.0%")).toBeInTheDocument();
    expect(screen.getByText("75.0 s / 2.8 min")).toBeInTheDocument();
    expect(await screen.findByRole("table", { name: "Fault catalog" })).toBeInTheDocument();
    expect(await seriousViolations()).toEqual([]);
  });

  it("shows an incident's diagnosis, evidence, migrations and history", async () => {
    routes();
    render();
    const user = userEvent.setup();
    await user.click(await screen.findByRole("button", { name: "Details of incident inc-1" }));
    const panel = await screen.findByRole("region", { name: "Incident inc-1" });
    expect(within(panel).getByText("gpu_fell_off_bus", { selector: "strong" })).toBeInTheDocument();
    expect(within(panel).getByText(/evidence xid=79, pcie_replay=12/)).toBeInTheDocument();
    expect(within(panel).getByRole("progressbar", { name: "Migration of wl-1" })).toHaveAttribute("aria-valuenow", "40");
    expect(within(panel).getByText(/wl-1: phase transfer/)).toBeInTheDocument();
    expect(within(within(panel).getByRole("table", { name: "History of incident inc-1" })).getByText("drained")).toBeInTheDocument();
  });

  it("asks for the SLO of the period chosen", async () => {
    routes();
    render();
    const user = userEvent.setup();
    await screen.findByText("92.0%");
    expect(periods).toEqual(["24h"]);
    await user.click(screen.getByText("7d"));
    await vi.waitFor(() => expect(periods).toEqual(["24h", "7d"]));
  });

  it("updates from a live incidents event", async () => {
    routes();
    const sources = render();
    await screen.findByRole("list", { name: "Incidents" });
    act(() => sources.latest().emit("incidents", { incidents: [summary("inc-1", { progress_percent: 80, state: "verifying" })] }));
    expect(await screen.findByText("verifying")).toBeInTheDocument();
    expect(screen.getByRole("progressbar", { name: "Migration progress of incident inc-1" })).toHaveAttribute("aria-valuenow", "80");
  });
});
