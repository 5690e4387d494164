import { act, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { LiveProvider } from "../../live/LiveProvider";
import { fakeEventSources } from "../../live/testing";
import { seriousViolations } from "../../test/axe";
import { fakeFetch, renderPage } from "../../test/render";
import AlertsPage from "./AlertsPage";
import { firesIn, parseDuration } from "./durations";
import { silenceBody } from "./SilenceForm";

const alert = (fingerprint: string, fields: Record<string, unknown> = {}) => ({
  fingerprint,
  rule: "GpuMemoryHigh",
  status: "firing",
  severity: "critical",
  tenant: "acme",
  labels: { alertname: "GpuMemoryHigh", gpu: "GPU-a", node: "node-a" },
  annotations: { summary: "GPU memory above 90%" },
  value: 93.5,
  starts_at: "2026-12-03T10:00:00Z",
  ends_at: null,
  ...fields,
});
const silence = {
  id: "s-1",
  matchers: [{ name: "node", op: "=", value: "node-a" }],
  starts_at: "2026-12-03T09:00:00Z",
  ends_at: "2099-01-01T00:00:00Z",
  created_by: "k-1",
  comment: "maintenance on node-a",
  owner_tenant: "acme",
  active: true,
};
const rule = { name: "GpuMemoryHigh", kind: "threshold", metric: "fb_used_pct", comparator: ">", threshold: 90, for: "5m", matchers: [], severity: "critical", summary: "", group: "default", mode: "stream", labels: {}, annotations: {}, bit: null, expr: null, interval: null, keep_firing_for: null, owner_tenant: null, runbook_url: null, window: null };
const delivery = { id: "n-1", receiver: "pager", status: "delivered", attempts: 1, created_at: "2026-12-03T10:00:05Z", delivered_at: "2026-12-03T10:00:06Z", last_error: null, next_attempt_at: null, fingerprints: ["f-1"], attempt_log: [] };

function routes(overrides: Record<string, (init: RequestInit, url: URL) => unknown> = {}) {
  const api = fakeFetch({
    "GET /alerting/v1/alerts": () => [alert("f-1"), alert("f-2", { labels: { alertname: "GpuMemoryHigh", node: "node-b" } })],
    "GET /alerting/v1/rules": () => [rule],
    "GET /alerting/v1/silences": () => [silence],
    "GET /alerting/v1/deliveries": () => [delivery],
    "POST /alerting/v1/silences": () => new Response(JSON.stringify({ ...silence, id: "s-2" }), { status: 201, headers: { "Content-Type": "application/json" } }),
    "DELETE /alerting/v1/silences/s-1": () => new Response(null, { status: 204 }),
    ...overrides,
  });
  vi.stubGlobal("fetch", api.fn);
  return api;
}

function render() {
  const sources = fakeEventSources();
  renderPage(
    <LiveProvider createEventSource={sources.create}>
      <AlertsPage />
    </LiveProvider>,
    { path: "/alerts" },
  );
  return sources;
}

describe("AlertsPage", () => {
  // jsdom has no canvas (axe asks for one); null is what it would give, without the noise.
  beforeEach(() => {
    vi.spyOn(HTMLCanvasElement.prototype, "getContext").mockReturnValue(null);
    // Mantine's Select scrolls its options into view; jsdom does not scroll.
    Element.prototype.scrollIntoView ??= () => undefined;
  });

  it("shows firing alerts with whether a silence mutes them, the rules, silences and deliveries", async () => {
    routes();
    render();
    const table = await screen.findByRole("table", { name: "Firing and pending alerts" });
    const items = within(table).getAllByRole("row").slice(1);
    expect(items).toHaveLength(2);
    expect(within(items[0]).getByText("silenced")).toBeInTheDocument();
    expect(within(items[0]).getByText('by "maintenance on node-a"')).toBeInTheDocument();
    expect(within(items[0]).getByText("firing")).toBeInTheDocument();
    expect(within(items[1]).getByText("not silenced")).toBeInTheDocument();
    expect(within(await screen.findByRole("table", { name: "Alert rules" })).getByText("fb_used_pct > 90")).toBeInTheDocument();
    expect(within(await screen.findByRole("table", { name: "Silences" })).getByText('node="node-a"')).toBeInTheDocument();
    expect(within(await screen.findByRole("table", { name: "Deliveries" })).getByText("pager")).toBeInTheDocument();
    expect(await seriousViolations()).toEqual([]);
  });

  it("counts a pending alert down to when its `for` elapses", async () => {
    const activeAt = new Date(Date.now() - 60_000).toISOString();
    routes({ "GET /alerting/v1/alerts": () => [alert("f-9", { status: "pending", active_at: activeAt, starts_at: activeAt })] });
    render();
    expect(await screen.findByText(/^fires in 4m \d+s$/)).toBeInTheDocument();
  });

  it("counts down to the fires_at the service gives, over the rule's `for`", async () => {
    const activeAt = new Date(Date.now() - 60_000).toISOString();
    const firesAt = new Date(Date.now() + 90_000).toISOString();
    const pending = { status: "pending", active_at: activeAt, starts_at: activeAt, fires_at: firesAt };
    routes({ "GET /alerting/v1/alerts": () => [alert("f-9", pending)] });
    render();
    expect(await screen.findByText(/^fires in 1m (29|30)s$/)).toBeInTheDocument();
  });

  it("shows a live alerts event without asking again", async () => {
    const api = routes();
    const sources = render();
    await screen.findByRole("table", { name: "Firing and pending alerts" });
    act(() => sources.latest().emit("alerts", { alerts: [alert("f-3", { rule: "GpuHot", labels: { alertname: "GpuHot" } })] }));
    expect(await screen.findByText("GpuHot")).toBeInTheDocument();
    expect(api.calls.filter((c) => c.path === "/alerting/v1/alerts")).toHaveLength(1);
  });

  it("creates a silence with the matchers, end and comment given", async () => {
    const api = routes();
    render();
    const user = userEvent.setup();
    await screen.findByRole("table", { name: "Silences" });
    await user.click(screen.getByRole("button", { name: "New silence" }));
    await user.type(screen.getByLabelText("Matcher 1 value"), "GpuMemoryHigh");
    await user.click(screen.getByRole("button", { name: "Add matcher" }));
    await user.type(screen.getByLabelText(/^Matcher 2 label/), "node");
    await user.click(screen.getByRole("textbox", { name: "Matcher 2 operator" }));
    await user.click(await screen.findByRole("option", { name: "=~" }));
    await user.type(screen.getByLabelText("Matcher 2 value"), "node-.*");
    await user.clear(screen.getByLabelText("Duration"));
    await user.type(screen.getByLabelText("Duration"), "90m");
    await user.type(screen.getByLabelText(/^Comment/), "driver upgrade");
    const before = Date.now();
    await user.click(screen.getByRole("button", { name: "Create silence" }));

    await vi.waitFor(() => expect(api.calls.some((c) => c.method === "POST")).toBe(true));
    const body = api.calls.find((c) => c.method === "POST")!.body as Record<string, unknown>;
    expect(body.matchers).toEqual([
      { name: "alertname", op: "=", value: "GpuMemoryHigh" },
      { name: "node", op: "=~", value: "node-.*" },
    ]);
    expect(body.comment).toBe("driver upgrade");
    expect(body).not.toHaveProperty("starts_at");
    const ends = Date.parse(body.ends_at as string);
    expect(ends - before).toBeGreaterThanOrEqual(90 * 60_000 - 1000);
    expect(ends - before).toBeLessThan(90 * 60_000 + 10_000);
    await vi.waitFor(() => expect(screen.queryByRole("form", { name: "New silence" })).not.toBeInTheDocument());
  });

  it("shows the service's refusal at the field it names", async () => {
    routes({
      "POST /alerting/v1/silences": () =>
        new Response(JSON.stringify({ error: { status: 422, code: "validation_error", message: "matchers.0.value: a tenant may not silence another tenant", field: "matchers.0.value", details: null } }), { status: 422 }),
    });
    render();
    const user = userEvent.setup();
    await screen.findByRole("table", { name: "Silences" });
    await user.click(screen.getByRole("button", { name: "New silence" }));
    await user.type(screen.getByLabelText("Matcher 1 value"), "x");
    await user.type(screen.getByLabelText(/^Comment/), "c");
    await user.click(screen.getByRole("button", { name: "Create silence" }));
    const input = screen.getByLabelText("Matcher 1 value");
    await vi.waitFor(() => expect(input).toHaveAccessibleDescription(/a tenant may not silence another tenant/));
  });

  it("expires a silence with DELETE", async () => {
    const api = routes();
    render();
    const user = userEvent.setup();
    await user.click(await screen.findByRole("button", { name: "Expire silence maintenance on node-a" }));
    await vi.waitFor(() => expect(api.calls.some((c) => c.method === "DELETE" && c.path === "/alerting/v1/silences/s-1")).toBe(true));
  });
});

describe("silence helpers", () => {
  it("reads Prometheus durations and refuses others", () => {
    expect(parseDuration("1h30m")).toBe(5400);
    expect(parseDuration("2d")).toBe(172_800);
    expect(parseDuration("soon")).toBeNull();
    expect(parseDuration("5m junk")).toBeNull();
  });

  it("words the countdown", () => {
    expect(firesIn(42.2)).toBe("fires in 43s");
    expect(firesIn(185)).toBe("fires in 3m 5s");
    expect(firesIn(-1)).toBe("fires now");
  });

  it("names the duration field when it cannot be read", () => {
    const draft = { matchers: [{ name: "a", op: "=" as const, value: "b" }], startsAt: "", endsAt: "", duration: "later", comment: "c" };
    expect(silenceBody(draft)).toEqual({ field: "duration", message: expect.stringContaining("duration") });
  });
});
