// Shared by the browser tests: the fixture the pytest harness passes (tests/integration/console), the
// browser, sign-in, the public APIs for setup, axe and screenshots.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { chromium } from "playwright-core";

const require = createRequire(import.meta.url);

/** {gateway, services: {name: url}, admin_key, tenants: {id: key}, screenshots}. */
export const E2E = JSON.parse(process.env.E2E ?? "null");
if (!E2E) throw new Error("E2E is not set: run through tests/integration/console/test_console_e2e.py");
export const [TENANT_A, TENANT_B] = Object.keys(E2E.tenants);
export const NETWORK = { vpc_id: "vpc-e2e1", subnet_id: "subnet-e2e1", security_group_id: "sg-default" };
export const DESKTOP = { width: 1280, height: 800 };
export const MOBILE = { width: 390, height: 844 };

export async function launch() {
  const executablePath = execFileSync("sh", ["-c", "command -v chromium"]).toString().trim();
  return chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
}

/** A fresh browser context (its own cookies) signed in with `key`, on `path`. */
export async function signedIn(browser, key, { viewport = DESKTOP, path = "/" } = {}) {
  const context = await browser.newContext({ baseURL: E2E.gateway, viewport, acceptDownloads: true });
  const page = await context.newPage();
  await page.goto("/");
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("button", { name: "Sign out" }).waitFor();
  if (path !== "/") await page.goto(path);
  return { context, page };
}

/** The public API on a service's own port, as the operator or a tenant would call it. */
export async function call(method, service, path, key, body) {
  const response = await fetch(E2E.services[service] + path, {
    method,
    headers: { "X-API-Key": key, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${service}${path} -> ${response.status}: ${text}`);
  return text ? JSON.parse(text) : null;
}

export async function until(probe, { timeout = 30_000, every = 250, what = "a condition" } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await probe();
      if (last) return last;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, every));
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what} (last: ${last})`);
}

/** A running workload of `key`'s tenant on one GPU, submitted through the API when there is none. */
export async function runningWorkload(key, { project = "vision" } = {}) {
  const running = await call("GET", "scheduler", "/v1/workloads?state=running&limit=100", key);
  let workload = running.find((w) => (w.tags ?? {}).project === project);
  if (!workload) {
    workload = await call("POST", "scheduler", "/v1/workloads", key, {
      kind: "instance",
      image: { name: "pytorch", version: "2.3" },
      urgency: 0.5,
      resources: { kind: "gpu", model: "L4", count: 1 },
      network: NETWORK,
      tags: { project, team: "e2e" },
    });
  }
  const id = workload.workload_id;
  await until(async () => (await call("GET", "scheduler", `/v1/workloads/${id}`, key)).state === "running", {
    timeout: 60_000,
    what: `${id} to run`,
  });
  const gpu = await until(
    async () => (await call("GET", "telemetry", "/v1/gpus/latest", key)).find((s) => s.workload_id === id)?.gpu,
    { timeout: 30_000, what: `live samples of ${id}` },
  );
  return { id, gpu };
}

const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

/** axe-core's serious and critical violations on the page as it is now. */
export async function axeViolations(page) {
  // Evaluated over the DevTools protocol: the console's CSP (script-src 'self') rightly refuses inline tags.
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(AXE);
  const result = await page.evaluate(async () => await window.axe.run(document, { resultTypes: ["violations"] }));
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`);
}

export async function screenshot(page, name) {
  mkdirSync(E2E.screenshots, { recursive: true });
  await page.screenshot({ path: join(E2E.screenshots, `${name}.png`), fullPage: false });
}
