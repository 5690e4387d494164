import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { seriousViolations } from "../../test/axe";
import { fakeFetch, renderPage } from "../../test/render";
import WorkloadsPage from "./WorkloadsPage";

afterEach(() => vi.unstubAllGlobals());

function workload(id: string, state: string, extra: Record<string, unknown> = {}) {
  return {
    workload_id: id,
    tenant_id: "acme",
    kind: "job",
    state,
    spec: { resources: { kind: "gpu", model: "A100-80GB", count: 2 } },
    urgency: 0.5,
    preemptible: false,
    tags: {},
    priority: 0.62,
    position: state === "queued" ? 1 : null,
    wait_reason: state === "queued" ? "capacity" : null,
    estimated_start: null,
    placement_id: null,
    submitted_at: "2026-12-03T10:00:00Z",
    ended_at: null,
    outcome: null,
    reason: "",
    ...extra,
  };
}

const PRIORITY = {
  workload_id: "wl-q",
  formula: "priority = min(0.6 * urgency + 0.4 * (1 - fair_share), 1.0)",
  urgency: 0.5,
  urgency_term: 0.3,
  decayed_usage_unit_hours: 12,
  entitlement_unit_hours: 60,
  shares: 1,
  total_shares: 4,
  fair_share: 0.2,
  fair_share_term: 0.32,
  raw: 0.62,
  priority: 0.62,
  pinned: false,
  explanation: "0.6 * urgency 0.500 = 0.300; fair share = used 12.00 / entitled 60.00 unit-hours = 0.200",
};

function routes() {
  return fakeFetch({
    "GET /scheduler/v1/queue": () => [
      { position: 1, workload_id: "wl-q", tenant_id: "acme", priority: 0.62, wait_reason: "capacity", estimated_start: null, submitted_at: "2026-12-03T10:00:00Z" },
    ],
    "GET /scheduler/v1/workloads": (_init, url) =>
      url.searchParams.get("state") === "running" ? [workload("wl-r", "running")] : [workload("wl-q", "queued"), workload("wl-r", "running"), workload("wl-done", "completed")],
    "GET /scheduler/v1/workloads/wl-q/priority": () => PRIORITY,
    "POST /scheduler/v1/workloads/wl-r/cancel": () => workload("wl-r", "cancelled"),
    "GET /scheduler/v1/workloads/wl-r/logs": () => new Response("epoch 1 loss 0.9\nepoch 2 loss 0.5\n", { status: 200, headers: { "Content-Type": "text/plain" } }),
  });
}

describe("the workloads page", () => {
  it("shows the queue with wait reasons and explains a priority term by term", async () => {
    vi.stubGlobal("fetch", routes().fn);
    renderPage(<WorkloadsPage />, { path: "/workloads" });

    const queue = await screen.findByRole("table", { name: "Queue" });
    expect(within(queue).getByText("capacity")).toBeInTheDocument();
    await userEvent.click(within(queue).getByRole("button", { name: "Explain the priority of wl-q" }));
    const terms = await screen.findByRole("table", { name: "Priority terms of wl-q" });
    expect(terms).toHaveTextContent("0.6 × urgency 0.500");
    expect(terms).toHaveTextContent("0.4 × (1 − 0.200)");
    expect(terms).toHaveTextContent("0.320");
    expect(await seriousViolations()).toEqual([]);
  });

  it("lists workloads with their states, filters by state, and offers cancel only while not finished", async () => {
    const fake = routes();
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<WorkloadsPage />, { path: "/workloads" });

    const table = await screen.findByRole("table", { name: "Workloads" });
    expect(within(table).getByText("completed")).toBeInTheDocument();
    expect(within(table).getByRole("button", { name: "Cancel wl-q" })).toBeInTheDocument();
    expect(within(table).queryByRole("button", { name: "Cancel wl-done" })).toBeNull();

    await userEvent.click(screen.getByRole("textbox", { name: "State" }));
    await userEvent.click(await screen.findByRole("option", { name: "running" }));
    await waitFor(() => expect(within(screen.getByRole("table", { name: "Workloads" })).queryByText("wl-q")).toBeNull());
    expect(fake.calls.some((c) => c.path === "/scheduler/v1/workloads" && c.method === "GET")).toBe(true);
  });

  it("asks before cancelling and then sends POST cancel", async () => {
    const fake = routes();
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<WorkloadsPage />, { path: "/workloads" });

    await userEvent.click(await screen.findByRole("button", { name: "Cancel wl-r" }));
    const dialog = await screen.findByRole("dialog", { name: "Cancel wl-r?" });
    expect(fake.calls.some((c) => c.method === "POST")).toBe(false);
    await userEvent.click(within(dialog).getByRole("button", { name: "Cancel workload" }));
    await waitFor(() => expect(fake.calls.filter((c) => c.method === "POST").map((c) => c.path)).toEqual(["/scheduler/v1/workloads/wl-r/cancel"]));
  });

  it("shows the last lines of a log, with a follow toggle", async () => {
    const fake = routes();
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<WorkloadsPage />, { path: "/workloads" });

    await userEvent.click(await screen.findByRole("button", { name: "Logs of wl-r" }));
    const log = await screen.findByLabelText("Log of wl-r");
    await waitFor(() => expect(log).toHaveTextContent("epoch 2 loss 0.5"));
    expect(fake.calls.find((c) => c.path === "/scheduler/v1/workloads/wl-r/logs")).toBeDefined();
    expect(await seriousViolations()).toEqual([]);
    await userEvent.click(screen.getByRole("switch", { name: "Follow" }));
    expect(screen.getByRole("switch", { name: "Follow" })).toBeChecked();
  });
});
