// The 3-step wizard, from image to a running instance; a refused step shows at the field the service named;
// "describe what you need" fills a draft the wizard continues; a live chart gains a point within 2 s.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { call, E2E, launch, runningWorkload, signedIn, TENANT_A, until } from "./lib.mjs";

let browser;
before(async () => (browser = await launch()));
after(async () => browser?.close());

async function choose(page, label, option) {
  await page.getByRole("textbox", { name: label }).click();
  await page.getByRole("option", { name: option }).first().click();
}

test("the wizard takes an instance from image to running", async () => {
  const key = E2E.tenants[TENANT_A];
  const { context, page } = await signedIn(browser, key, { path: "/create" });
  await page.getByRole("heading", { level: 1 }).waitFor();
  await choose(page, "Image", /pytorch/);
  await choose(page, "Version", /./);
  await page.getByRole("button", { name: "Next" }).click();

  // Step 2: whole GPUs, with the recommendation beside them.
  await choose(page, "GPU type", "L4");
  await page.getByRole("textbox", { name: "GPU count" }).fill("1");
  await page.getByLabel("GPU recommendation").first().waitFor();
  await page.getByRole("button", { name: "Next" }).click();

  // Step 3: a VPC id the service refuses is shown at that field, then corrected.
  const vpc = page.getByRole("textbox", { name: "VPC ID" });
  await vpc.fill("not a vpc");
  await page.getByRole("textbox", { name: "Subnet ID" }).fill("subnet-e2e1");
  await page.getByRole("textbox", { name: "Security group ID" }).fill("sg-default");
  await page.getByRole("button", { name: "Next" }).click();
  await until(async () => (await vpc.getAttribute("aria-invalid")) === "true", { timeout: 10_000, what: "the VPC id's error" });
  const described = await vpc.getAttribute("aria-describedby");
  assert.match(await page.locator(`[id="${described?.split(" ").find((d) => d.includes("error"))}"]`).innerText(), /vpc|pattern|match/i);
  await vpc.fill("vpc-e2e1");
  await page.getByRole("textbox", { name: "Subnet ID" }).fill("subnet-e2e1");
  await page.getByRole("textbox", { name: "Security group ID" }).fill("sg-default");
  await page.getByRole("button", { name: "Next" }).click();

  // Review: what will be created, its price and queue position, then submit.
  await page.getByRole("table", { name: "What will be created" }).waitFor();
  await page.getByText(/queue/i).first().waitFor();
  await page.getByRole("button", { name: "Submit" }).click();
  const submitted = await page.getByText(/was submitted/).innerText();
  const id = /wl-[0-9a-f]+/.exec(submitted)?.[0];
  assert.ok(id, submitted);
  await until(async () => (await call("GET", "scheduler", `/v1/workloads/${id}`, key)).state === "running", {
    timeout: 60_000,
    what: `${id} to run`,
  });
  await page.getByRole("link", { name: "See it in Workloads" }).click();
  await page.getByText(id).first().waitFor();
  await page.getByRole("row").filter({ hasText: id }).getByText(/running/i).first().waitFor({ timeout: 15_000 });
  await call("POST", "scheduler", `/v1/workloads/${id}/cancel`, key);
  await context.close();
});

test("describing what you need in Chinese fills a draft the wizard continues", async () => {
  const { context, page } = await signedIn(browser, E2E.tenants[TENANT_A], { path: "/describe" });
  await page.getByRole("textbox", { name: "Describe what you need" }).fill("给我分配一个能跑BERT的GPU");
  await page.getByRole("button", { name: /describe|read|fill/i }).first().click();
  await page.getByText(/BERT/).nth(1).waitFor();
  await page.getByRole("link", { name: "Continue in the wizard" }).or(page.getByRole("button", { name: "Continue in the wizard" })).click();
  await page.waitForURL(/\/create\?draft=dr-/);
  await page.getByRole("heading", { level: 1 }).waitFor();
  await context.close();
});

test("a live chart on the GPU page gains a point within 2 s", async () => {
  const key = E2E.tenants[TENANT_A];
  const { gpu } = await runningWorkload(key, { project: "vision" });
  const { context, page } = await signedIn(browser, key, { path: `/gpus/${encodeURIComponent(gpu)}` });
  const chart = page.getByRole("img", { name: /utilisation/i }).first();
  await chart.waitFor();
  const points = async () => Number(/(\d+) points/.exec((await chart.getAttribute("aria-label")) ?? "")?.[1] ?? -1);
  await until(async () => (await points()) > 0, { timeout: 10_000, what: "the chart's first points" });
  const before = await points();
  const started = Date.now();
  await until(async () => (await points()) > before, { timeout: 2000, every: 50, what: "a new point within 2 s" });
  assert.ok(Date.now() - started <= 2000);
  await context.close();
});
