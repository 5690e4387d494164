import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { seriousViolations } from "../../test/axe";
import { fakeFetch, renderPage } from "../../test/render";
import DescribePage from "./DescribePage";

afterEach(() => vi.unstubAllGlobals());

const DESCRIBED = {
  draft: {
    draft_id: "dr-7",
    tenant_id: "acme",
    steps: { image: null, resources: { kind: "gpu", model: "L4", count: 1, min_memory_gb: null }, network: null, options: {} },
    missing: ["image", "network"],
    workload_id: null,
  },
  reading: [
    { phrase: "BERT", meaning: "BERT base: about 2 GB for inference" },
    { phrase: "能跑", meaning: "inference" },
  ],
  not_understood: ["quickly-ish"],
  notes: ["no framework named: the image step is left for you"],
};

describe("the describe page", () => {
  it("sends the text and shows the reading, what it did not understand, and the draft", async () => {
    const fake = fakeFetch({ "POST /scheduler/v1/workloads/drafts/describe": () => DESCRIBED });
    vi.stubGlobal("fetch", fake.fn);
    renderPage(<DescribePage />, { path: "/describe" });

    const box = screen.getByRole("textbox", { name: "Describe what you need" });
    expect(box).toHaveAttribute("placeholder", expect.stringContaining("给我分配一个能跑BERT的GPU"));
    await userEvent.type(box, "给我分配一个能跑BERT的GPU quickly-ish");
    await userEvent.click(screen.getByRole("button", { name: "Read it" }));

    expect(await screen.findByText(/BERT base: about 2 GB for inference/)).toBeInTheDocument();
    expect(screen.getByRole("list", { name: "Reading" })).toHaveTextContent("能跑");
    expect(screen.getByText(/Not understood: “quickly-ish”/)).toBeInTheDocument();
    expect(screen.getByText("no framework named: the image step is left for you")).toBeInTheDocument();
    expect(screen.getByRole("table", { name: "Draft steps" })).toHaveTextContent("model: L4");
    expect(screen.getByRole("link", { name: "Continue in the wizard" })).toHaveAttribute("href", "/create?draft=dr-7");
    expect(await seriousViolations()).toEqual([]);
    expect(fake.calls.at(-1)).toMatchObject({ method: "POST", body: { text: "给我分配一个能跑BERT的GPU quickly-ish" } });
  });

  it("shows a refusal naming the text at the textarea", async () => {
    const refusal = { error: { status: 422, code: "validation_error", message: "text: at most 2000 characters", field: "text" } };
    vi.stubGlobal("fetch", fakeFetch({ "POST /scheduler/v1/workloads/drafts/describe": () => new Response(JSON.stringify(refusal), { status: 422 }) }).fn);
    renderPage(<DescribePage />, { path: "/describe" });
    const box = screen.getByRole("textbox", { name: "Describe what you need" });
    await userEvent.type(box, "x");
    await userEvent.click(screen.getByRole("button", { name: "Read it" }));
    expect(await screen.findByText("text: at most 2000 characters")).toBeInTheDocument();
    expect(box).toHaveAttribute("aria-invalid", "true");
  });
});
