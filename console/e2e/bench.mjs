// The console's benchmark, driven by bench/console.py (which starts the stack and gives a tenant 64 running
// GPUs): first load (JS gzipped, first contentful paint, time to interactive on loopback) and the GPUs page
// with 64 GPUs live at 1 Hz (main-thread time per update: from Chromium's trace of the page, every task from
// one update's performance measure to the next, and the handler alone from that measure; the gateway's CPU
// per streamed sample from its /metrics). Prints one JSON object per result line.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { E2E, launch, signedIn } from "./lib.mjs";
import { CATEGORIES, perUpdate } from "./trace.mjs";

const BENCH = "console";
const WINDOW_S = Number(process.env.BENCH_LIVE_S ?? 30);
const key = Object.values(E2E.tenants)[0];
const emit = (metric, value, unit, extra = {}) =>
  console.log(JSON.stringify({ bench: BENCH, metric, value: Math.round(value * 1000) / 1000, unit, ...extra }));
const pct = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((q / 100) * sorted.length) - 1)];
};

async function metrics() {
  const text = await (await fetch(`${E2E.gateway}/metrics`)).text();
  const value = (name) =>
    text
      .split("\n")
      .filter((l) => l.startsWith(name) && !l.startsWith("#"))
      .reduce((sum, l) => sum + Number(l.trim().split(/\s+/).pop()), 0);
  return { cpu: value("process_cpu_seconds_total"), samples: value("gateway_live_samples_sent_total") };
}

const browser = await launch();
try {
  // 1. First load of the sign-in page on a cold cache: every script it fetched, gzipped as served compressed.
  const cold = await browser.newContext({ baseURL: E2E.gateway });
  const page = await cold.newPage();
  const scripts = [];
  page.on("response", async (r) => {
    if (r.request().resourceType() === "script") scripts.push(r.body().then((b) => gzipSync(b, { level: 9 }).length));
  });
  await page.goto("/", { waitUntil: "load" });
  await page.getByLabel("API key").waitFor();
  const paint = await page
    .waitForFunction(() => performance.getEntriesByName("first-contentful-paint")[0]?.startTime, null, { timeout: 5000 })
    .then((handle) => handle.jsonValue())
    .catch(() => -1);
  const interactive = await page.evaluate(() => performance.now());
  const jsBytes = (await Promise.all(scripts)).reduce((a, b) => a + b, 0);
  emit("first_load_js_gzip", jsBytes / 1024, "KiB", { target: "<= 300", method: "sum of gzip -9 sizes of every script the sign-in page fetched on a cold cache" });
  emit("first_contentful_paint", paint, "ms", { method: "sign-in page, cold cache, loopback, performance paint entry" });
  emit("time_to_interactive", interactive, "ms", { method: "navigation start to the sign-in form present and focusable (loopback)" });
  await cold.close();

  // 2. Signed in, a full load of the GPUs page: time until its table holds its first live values.
  const { context, page: gpus } = await signedIn(browser, key);
  await gpus.goto("/gpus");
  await gpus.getByRole("heading", { level: 1 }).waitFor();
  await gpus.waitForFunction(() => performance.getEntriesByName("live-update").length > 0, null, { timeout: 20_000 });
  const ready = await gpus.evaluate(() => performance.getEntriesByName("live-update")[0].startTime + performance.getEntriesByName("live-update")[0].duration);
  emit("gpus_page_first_live_values", ready, "ms", { method: "navigation start to the first live update drawn on the GPUs page (64 GPUs)" });
  // The table lists 64 GPUs and renders the rows near the view (the others are not mounted and not streamed).
  const shown = await gpus.evaluate(() => document.querySelectorAll('[role="img"][aria-label*="points"]').length);
  const listed = await gpus.evaluate(() => Number(document.querySelector('table[aria-label="GPUs"]')?.getAttribute("aria-rowcount") ?? 1) - 1);

  // 3. 64 GPUs live at 1 Hz: main-thread time per update, and the gateway's CPU per sample streamed.
  await gpus.waitForTimeout(3000);
  await gpus.evaluate(() => performance.clearMeasures("live-update"));
  const before = await metrics();
  const traceDir = mkdtempSync(join(tmpdir(), "console-bench-"));
  const tracePath = process.env.BENCH_TRACE ?? join(traceDir, "trace.json");
  await browser.startTracing(gpus, { path: tracePath, categories: CATEGORIES });
  await gpus.waitForTimeout(WINDOW_S * 1000);
  await browser.stopTracing();
  const after = await metrics();
  const traced = perUpdate(JSON.parse(readFileSync(tracePath, "utf8")), "live-update");
  rmSync(traceDir, { recursive: true, force: true });
  const updates = await gpus.evaluate(() => performance.getEntriesByName("live-update").map((e) => e.duration));
  // The whole cost of an update: every main-thread task from one update to the next (the handler, the frame's
  // style, layout and paint, timers, GC), from the browser's own trace of the page.
  const wall = traced.map((u) => u.wall);
  const method = `GPUs page listing ${listed} GPUs, ${shown} rows rendered near the view with a live sparkline and 3 live values each, ${traced.length} updates in ${WINDOW_S}s; Chromium trace of the page: every main-thread task from one update's performance measure to the next (handler, style, layout, paint, timers, GC), busy wall time`;
  emit("live_update_main_thread_p50", pct(wall, 50), "ms", { method });
  emit("live_update_main_thread_p99", pct(wall, 99), "ms", { target: "<= 10", method });
  emit("live_update_main_thread_max", Math.max(...wall), "ms", { method });
  emit("live_updates_over_10ms", wall.filter((d) => d > 10).length, "updates", { method, of: wall.length });
  const cpu = traced.map((u) => u.cpu);
  emit("live_update_main_thread_cpu_p50", pct(cpu, 50), "ms", { method: `${method}; the same tasks' thread CPU time` });
  emit("live_update_main_thread_cpu_p99", pct(cpu, 99), "ms", { method: `${method}; the same tasks' thread CPU time` });
  const mean = (kind) => traced.reduce((s, u) => s + u[kind], 0) / Math.max(1, traced.length);
  for (const kind of ["script", "style_layout", "paint", "gc"]) {
    emit(`live_update_${kind}_mean`, mean(kind), "ms", { method: `${method}; the part in ${kind.replace("_", " and ")}${kind === "gc" ? " (inside script)" : ""}` });
  }
  const handler = `performance.measure around each samples event's handling alone (parse, buffers, chart redraw calls; not the frame it causes), ${updates.length} updates`;
  emit("live_update_handler_p50", pct(updates, 50), "ms", { method: handler });
  emit("live_update_handler_p99", pct(updates, 99), "ms", { method: handler });
  console.error(`per-update main-thread busy ms (in order): ${wall.map((d) => d.toFixed(1)).join(" ")}`);
  console.error(`per-update main-thread CPU ms (in order): ${cpu.map((d) => d.toFixed(1)).join(" ")}`);
  const samples = after.samples - before.samples;
  emit("gateway_cpu_per_sample", samples > 0 ? ((after.cpu - before.cpu) * 1e6) / samples : -1, "us", {
    method: `gateway process CPU (process_cpu_seconds_total) over ${samples} samples streamed to this one tab in ${WINDOW_S}s`,
  });
  // Per second of one open tab: most of it does not grow with the samples (telemetry's stream read, the alert
  // and incident polls, heartbeats), so the figure per sample rises when fewer rows are streamed.
  emit("gateway_cpu_per_tab_second", ((after.cpu - before.cpu) * 1000) / WINDOW_S, "ms/s", {
    method: `gateway process CPU (process_cpu_seconds_total) per second of this one tab's stream, ${WINDOW_S}s`,
  });
  await context.close();
} finally {
  await browser.close();
}
