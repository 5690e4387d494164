// A second tenant sees none of the first tenant's workloads, GPUs, costs or alerts: in the pages, and on the
// live stream even when it asks for the first tenant's GPU by name.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { call, E2E, launch, runningWorkload, signedIn, TENANT_A, TENANT_B, until } from "./lib.mjs";

const RULE = "E2eIsolationProbe";
let browser;
let theirs;
before(async () => {
  browser = await launch();
  const key = E2E.tenants[TENANT_A];
  theirs = await runningWorkload(key, { project: "secret-project" });
  await call("POST", "alerting", "/v1/rules", key, {
    name: RULE, metric: "gpu_temp_c", comparator: ">", threshold: 1, for: "0s", severity: "info", summary: "isolation probe",
  });
  await until(async () => (await call("GET", "alerting", "/v1/alerts", key)).some((a) => JSON.stringify(a).includes(RULE)), {
    timeout: 30_000, what: "the first tenant's alert",
  });
  await call("POST", "billing", "/v1/admin/accrual", E2E.admin_key);
});
after(async () => {
  await call("DELETE", "alerting", `/v1/rules/${RULE}`, E2E.tenants[TENANT_A]).catch(() => undefined);
  await browser?.close();
});

test("the second tenant's pages show nothing of the first tenant's", async () => {
  const { context, page } = await signedIn(browser, E2E.tenants[TENANT_B]);
  for (const [path, secrets] of [
    ["/workloads", [theirs.id]],
    ["/gpus", [theirs.id]],
    ["/alerts", [RULE]],
    ["/costs", ["secret-project"]],
    ["/", [RULE, "secret-project"]],
  ]) {
    await page.goto(path);
    await page.getByRole("heading", { level: 1 }).first().waitFor();
    await page.waitForLoadState("networkidle").catch(() => undefined);
    const text = await page.locator("body").innerText();
    for (const secret of secrets) assert.ok(!text.includes(secret), `${path} shows ${secret} to ${TENANT_B}`);
  }
  // The first tenant's GPU, asked for by id, is not the second tenant's to see.
  await page.goto(`/gpus/${encodeURIComponent(theirs.gpu)}`);
  await page.getByRole("heading", { level: 1 }).first().waitFor();
  assert.ok(!(await page.locator("body").innerText()).includes(theirs.id));
  await context.close();
});

test("the second tenant's live stream carries none of the first tenant's samples or alerts", async () => {
  const { context, page } = await signedIn(browser, E2E.tenants[TENANT_B]);
  const seen = await page.evaluate(async (gpu) => {
    const events = [];
    const source = new EventSource(`/api/live?gpus=${encodeURIComponent(gpu)}&alerts=1&incidents=1`);
    for (const type of ["samples", "alerts", "incidents"]) source.addEventListener(type, (e) => events.push({ type, data: e.data }));
    await new Promise((r) => setTimeout(r, 3500));
    source.close();
    return events;
  }, theirs.gpu);
  assert.ok(seen.some((e) => e.type === "alerts"), "the stream answered with the caller's alerts");
  for (const event of seen) {
    assert.ok(!event.data.includes(theirs.gpu), `a ${event.type} event carried ${theirs.gpu}`);
    assert.ok(!event.data.includes(RULE), `a ${event.type} event carried ${RULE}`);
  }
  // The same request from the first tenant does carry its GPU: the check above can fail.
  const own = await signedIn(browser, E2E.tenants[TENANT_A]);
  const mine = await own.page.evaluate(async (gpu) => {
    const source = new EventSource(`/api/live?gpus=${encodeURIComponent(gpu)}`);
    const data = await new Promise((resolve) => source.addEventListener("samples", (e) => resolve(e.data)));
    source.close();
    return data;
  }, theirs.gpu);
  assert.ok(mine.includes(theirs.gpu));
  await own.context.close();
  await context.close();
});
