import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { seriousViolations } from "../../test/axe";
import { fakeFetch, renderPage } from "../../test/render";
import CreatePage from "./CreatePage";

afterEach(() => vi.unstubAllGlobals());

const IMAGES = [{ name: "pytorch", framework: "PyTorch", versions: ["2.4", "2.5"], references: {} }];
const CATALOG = {
  version: "1",
  models: [
    { name: "A100-80GB", memory_gb: 80, units: "8", mig_supported: true, mig_profiles: [{ name: "1g.10gb", memory_gb: 10, units: "1" }] },
    { name: "L4", memory_gb: 24, units: "2", mig_supported: false, mig_profiles: [] },
  ],
};
const PRICES = [
  {
    price_id: "p-a100",
    gpu_model: "A100-80GB",
    mig_profile: null,
    share_of: null,
    pricing_class: "on_demand",
    basis: "gpu_hour",
    micro_per_hour: 2_500_000,
    effective_from: "2020-01-01T00:00:00Z",
    effective_to: null,
  },
];
const RECOMMENDATION = {
  model: "A100-80GB",
  count: 2,
  memory_need_gb: 120,
  reasons: ["needs about 120 GB: two A100-80GB hold it"],
  similar_jobs: 3,
  history_too_thin: false,
  expected_duration_s: 3600,
  fleet_gpus: 8,
};
const PREDICTION = { p50_s: 5400, p90_s: 7200, samples: 4, history_too_thin: false, reasons: [] };

function draft(steps: Record<string, unknown>, missing: string[]) {
  return { draft_id: "dr-1", tenant_id: "acme", steps: { image: null, resources: null, network: null, options: {}, ...steps }, missing, workload_id: null };
}

const previews: string[] = [];

function routes(extra: Record<string, (init: RequestInit, url: URL) => unknown> = {}) {
  return fakeFetch({
    "GET /scheduler/v1/images": () => IMAGES,
    "GET /inventory/v1/catalog": () => CATALOG,
    "GET /billing/v1/prices": () => PRICES,
    "GET /scheduler/v1/recommendations/gpu": () => RECOMMENDATION,
    "GET /scheduler/v1/predictions/duration": () => PREDICTION,
    "GET /scheduler/v1/queue/preview": (_init, url) => {
      previews.push(url.search);
      return { position: 3, ahead: 2, same_model_ahead: 1, priority: "normal", priority_value: 0.62, explanation: "2 waiting workloads come before it" };
    },
    "POST /scheduler/v1/workloads/drafts": () => draft({}, ["image", "resources", "network"]),
    "PUT /scheduler/v1/workloads/drafts/dr-1/image": () => draft({ image: { name: "pytorch", version: "2.5" } }, ["resources", "network"]),
    "PUT /scheduler/v1/workloads/drafts/dr-1/resources": () => draft({}, ["network"]),
    "PUT /scheduler/v1/workloads/drafts/dr-1/network": () => draft({}, []),
    "POST /scheduler/v1/workloads/drafts/dr-1/submit": () => ({ workload_id: "wl-42", state: "queued" }),
    ...extra,
  });
}

async function pick(label: RegExp, option: string) {
  await userEvent.click(await screen.findByRole("textbox", { name: label }));
  await userEvent.click(await screen.findByRole("option", { name: new RegExp(option) }));
}

describe("the create wizard", () => {
  it("walks image, resources and network, shows advice, and the review submits the right bodies", async () => {
    const fake = routes();
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<CreatePage />, { path: "/create" });

    expect(await screen.findByRole("heading", { level: 1, name: "Create" })).toBeInTheDocument();
    await screen.findByRole("textbox", { name: /^Image/ });
    expect(await seriousViolations()).toEqual([]);
    await pick(/^Image/, "pytorch");
    await pick(/^Version/, "2.5");
    await userEvent.click(screen.getByRole("button", { name: "Next" }));

    expect(await screen.findByText(/needs about 120 GB: two A100-80GB hold it/)).toBeInTheDocument();
    expect(screen.getByText(/Predicted training time: about 1 h 30 min/)).toBeInTheDocument();
    await userEvent.click(screen.getByRole("button", { name: "Use the recommendation" }));
    expect(await screen.findByText("5.00")).toBeInTheDocument(); // 2 × 2.50 per hour
    expect(await seriousViolations()).toEqual([]);
    await userEvent.click(screen.getByRole("button", { name: "Next" }));

    await userEvent.type(await screen.findByRole("textbox", { name: /VPC ID/ }), "vpc-abcd1234");
    await userEvent.type(screen.getByRole("textbox", { name: /Subnet ID/ }), "subnet-abcd1234");
    await userEvent.type(screen.getByRole("textbox", { name: /Security group ID/ }), "sg-abcd1234");
    await userEvent.click(screen.getByRole("button", { name: "Next" }));

    expect(await screen.findByRole("heading", { name: "Review" })).toBeInTheDocument();
    expect(screen.getByRole("table", { name: "What will be created" })).toHaveTextContent("2 × A100-80GB");
    expect(await screen.findByText(/Queue position it would get/)).toHaveTextContent("3 (2 ahead, 1 of them for the same GPU model; priority normal, 0.620)");
    expect(await seriousViolations()).toEqual([]);
    await userEvent.click(screen.getByRole("button", { name: "Submit" }));

    expect(await screen.findByText("wl-42")).toBeInTheDocument();
    expect(screen.getByRole("link", { name: "See it in Workloads" })).toHaveAttribute("href", "/workloads");
    const sent = fake.calls.filter((c) => c.method !== "GET");
    expect(sent.map((c) => `${c.method} ${c.path}`)).toEqual([
      "POST /scheduler/v1/workloads/drafts",
      "PUT /scheduler/v1/workloads/drafts/dr-1/image",
      "PUT /scheduler/v1/workloads/drafts/dr-1/resources",
      "PUT /scheduler/v1/workloads/drafts/dr-1/network",
      "POST /scheduler/v1/workloads/drafts/dr-1/submit",
    ]);
    expect(sent[0].body).toEqual({ options: { kind: "instance", urgency: 0.5, preemptible: false } });
    expect(sent[1].body).toEqual({ name: "pytorch", version: "2.5" });
    expect(sent[2].body).toEqual({ kind: "gpu", model: "A100-80GB", count: 2 });
    expect(sent[3].body).toEqual({ vpc_id: "vpc-abcd1234", subnet_id: "subnet-abcd1234", security_group_id: "sg-abcd1234", public_ip: false });
    expect(previews.at(-1)).toBe("?priority=normal&gpu_model=A100-80GB&gpu_count=2");
  }, 20_000); // a long, many-step user flow: slow on a loaded CI machine

  it("shows a 422 from a step at the field the service named", async () => {
    const refusal = { error: { status: 422, code: "validation_error", message: "resources.count: must be at most 64", field: "resources.count" } };
    const fake = routes({
      "GET /scheduler/v1/workloads/drafts/dr-1": () => draft({ image: { name: "pytorch", version: "2.5" } }, ["resources", "network"]),
      "PUT /scheduler/v1/workloads/drafts/dr-1/resources": () => new Response(JSON.stringify(refusal), { status: 422 }),
    });
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<CreatePage />, { path: "/create?draft=dr-1" });

    const count = await screen.findByRole("textbox", { name: /GPU count/ });
    await pick(/GPU type/, "L4");
    await userEvent.click(screen.getByRole("button", { name: "Next" }));

    await waitFor(() => expect(count).toHaveAccessibleDescription(/must be at most 64/));
    expect(count).toHaveAttribute("aria-invalid", "true");
    expect(fake.calls.some((c) => c.method === "POST" && c.path === "/scheduler/v1/workloads/drafts")).toBe(false);
  });
});
