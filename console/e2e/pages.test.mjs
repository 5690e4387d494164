// Every page, desktop and mobile: axe-core finds no serious or critical violation; at 390×844 nothing scrolls
// sideways and every control is a 44 px touch target; a screenshot of each (CONSOLE_SCREENSHOTS keeps them).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { axeViolations, DESKTOP, E2E, launch, MOBILE, runningWorkload, screenshot, signedIn, TENANT_A } from "./lib.mjs";

let browser;
let gpu;
before(async () => {
  browser = await launch();
  gpu = (await runningWorkload(E2E.tenants[TENANT_A], { project: "vision" })).gpu;
});
after(async () => browser?.close());

const PAGES = () => [
  ["overview", "/", TENANT_A],
  ["create", "/create", TENANT_A],
  ["describe", "/describe", TENANT_A],
  ["workloads", "/workloads", TENANT_A],
  ["gpus", "/gpus", TENANT_A],
  ["gpu-detail", `/gpus/${encodeURIComponent(gpu)}`, TENANT_A],
  ["alerts", "/alerts", TENANT_A],
  ["recovery", "/recovery", TENANT_A],
  ["costs", "/costs", TENANT_A],
  ["admin", "/admin", null],
];

async function settled(page) {
  await page.getByRole("heading", { level: 1 }).first().waitFor();
  await page
    .waitForFunction(() => !document.querySelector('[aria-label^="Loading"]'), null, { timeout: 10_000 })
    .catch(() => undefined);
  await page.waitForTimeout(600); // the first live points and lazy sections
}

/** Controls smaller than a 44×44 px touch target (WCAG 2.5.5), by name. */
async function smallTargets(page) {
  return page.evaluate(() => {
    const small = [];
    const controls = document.querySelectorAll("button, a[href], input:not([type=hidden]), select, textarea, [role=button], [role=tab]");
    for (const el of controls) {
      const box = el.getBoundingClientRect();
      if (box.width === 0 || box.height === 0 || getComputedStyle(el).visibility === "hidden") continue;
      if (el.closest("p, li:not([role])") && el.tagName === "A") continue; // inline text links are exempt
      // A control inside a labelled wrapper (Mantine checkbox/radio) counts by its clickable label.
      const target = el.closest("label") ?? el;
      const rect = target.getBoundingClientRect();
      if (rect.height < 44 || rect.width < 44) {
        const name = el.getAttribute("aria-label") || el.textContent?.trim() || el.getAttribute("name") || el.tagName;
        small.push(`${name.slice(0, 40)} (${Math.round(rect.width)}×${Math.round(rect.height)})`);
      }
    }
    return small;
  });
}

test("the sign-in page: accessible, desktop and mobile", async () => {
  for (const [viewport, suffix] of [[DESKTOP, "desktop"], [MOBILE, "mobile"]]) {
    const context = await browser.newContext({ baseURL: E2E.gateway, viewport });
    const page = await context.newPage();
    await page.goto("/");
    await page.getByLabel("API key").waitFor();
    assert.deepEqual(await axeViolations(page), [], `sign-in ${suffix}`);
    await screenshot(page, `login-${suffix}`);
    await context.close();
  }
});

for (const [viewport, suffix] of [[DESKTOP, "desktop"], [MOBILE, "mobile"]]) {
  test(`every page at ${suffix} size: no serious accessibility violation${suffix === "mobile" ? ", no sideways scroll, 44 px targets" : ""}`, async () => {
    const sessions = new Map();
    const problems = [];
    for (const [name, path, tenant] of PAGES()) {
      const key = tenant ? E2E.tenants[tenant] : E2E.admin_key;
      if (!sessions.has(key)) sessions.set(key, await signedIn(browser, key, { viewport }));
      const { page } = sessions.get(key);
      await page.goto(path);
      await settled(page);
      for (const v of await axeViolations(page)) problems.push(`${name}: ${v}`);
      if (suffix === "mobile") {
        const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        if (wide > 0) problems.push(`${name}: scrolls sideways by ${wide}px`);
        for (const s of await smallTargets(page)) problems.push(`${name}: small touch target ${s}`);
      }
      await screenshot(page, `${name}-${suffix}`);
    }
    for (const { context } of sessions.values()) await context.close();
    assert.deepEqual(problems, []);
  });
}

test("the console installs as a web app: its manifest is served and linked", async () => {
  const context = await browser.newContext({ baseURL: E2E.gateway });
  const page = await context.newPage();
  await page.goto("/");
  const href = await page.getAttribute('link[rel="manifest"]', "href");
  const manifest = await (await context.request.get(href)).json();
  assert.equal(manifest.display, "standalone");
  assert.ok(manifest.icons.length > 0 && manifest.start_url);
  await context.close();
});
