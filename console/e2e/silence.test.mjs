// A silence made in the Alerts page suppresses the page (the webhook notification) of the GPU it matches,
// while the same rule still pages for the GPU it does not match.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, test } from "node:test";
import { call, E2E, launch, runningWorkload, signedIn, TENANT_A, until } from "./lib.mjs";

const RULE = "E2eGpuWarm";
const RECEIVER = "e2e-pager";
let browser;
let server;
const received = [];

before(async () => {
  browser = await launch();
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      received.push(body);
      res.writeHead(200).end("ok");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
});
after(async () => {
  await browser?.close();
  server?.close();
});

test("a silence created in the console suppresses the page of the GPU it matches", async () => {
  const key = E2E.tenants[TENANT_A];
  const one = await runningWorkload(key, { project: "silence-1" });
  const two = await runningWorkload(key, { project: "silence-2" });
  assert.notEqual(one.gpu, two.gpu);
  const url = `http://127.0.0.1:${server.address().port}/hook`;
  await call("POST", "alerting", "/v1/receivers", E2E.admin_key, { name: RECEIVER, kind: "webhook", url, secret: "e2e-secret-0123456789" });
  const tree = await call("GET", "alerting", "/v1/routes", E2E.admin_key);
  const route = { receiver: RECEIVER, matchers: [{ name: "alertname", op: "=", value: RULE }] };
  await call("PUT", "alerting", "/v1/routes", E2E.admin_key, { default: tree.default, routes: [route, ...(tree.routes ?? [])] });

  // The tenant silences its first GPU in the Alerts page, as on-call would before maintenance.
  const { context, page } = await signedIn(browser, key, { path: "/alerts" });
  await page.getByRole("button", { name: /new silence/i }).click();
  const form = page.getByRole("form", { name: /silence/i });
  await form.getByLabel(/label/i).first().fill("gpu");
  await form.getByLabel(/value/i).first().fill(one.gpu);
  await form.getByLabel(/comment/i).fill("maintenance of one GPU");
  await form.getByRole("button", { name: /create silence/i }).click();
  await page.getByText(one.gpu).first().waitFor();

  // Then a rule that fires on every GPU it runs on.
  await call("POST", "alerting", "/v1/rules", key, {
    name: RULE,
    metric: "gpu_temp_c",
    comparator: ">",
    threshold: 1,
    for: "1s",
    severity: "warning",
    summary: "warm GPU (e2e)",
  });
  const paged = await until(() => received.find((b) => b.includes(two.gpu)), { timeout: 60_000, what: "the page for the unsilenced GPU" });
  assert.ok(paged.includes(RULE));
  // The silenced GPU's alert fires too, and is shown as silenced, but nobody is paged for it.
  await page.reload();
  const row = page.getByRole("row").filter({ hasText: one.gpu }).filter({ hasText: RULE });
  await row.first().waitFor({ timeout: 20_000 });
  await row.getByText(/silenced|suppressed/i).first().waitFor({ timeout: 20_000 });
  await new Promise((r) => setTimeout(r, 4000)); // past the group wait of the notification that paged two
  assert.equal(received.filter((b) => b.includes(one.gpu)).length, 0, "the silenced GPU paged nobody");
  await call("DELETE", "alerting", `/v1/rules/${RULE}`, key);
  await context.close();
});
