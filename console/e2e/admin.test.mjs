// The admin page is the admin key's only: a tenant is refused it, in the page and at the API.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { E2E, launch, signedIn, TENANT_A } from "./lib.mjs";

let browser;
before(async () => (browser = await launch()));
after(async () => browser?.close());

test("a tenant is refused the admin page and offered no link to it", async () => {
  const { context, page } = await signedIn(browser, E2E.tenants[TENANT_A]);
  assert.equal(await page.getByRole("navigation").getByRole("link", { name: "Admin" }).count(), 0);
  const adminCalls = [];
  page.on("request", (r) => r.url().includes("/v1/admin/") && adminCalls.push(r.url()));
  await page.goto("/admin");
  await page.getByRole("heading", { level: 1, name: /needs an admin key/i }).waitFor();
  assert.deepEqual(adminCalls, []);
  // And the API behind it refuses the tenant's session too.
  const status = await page.evaluate(async () => (await fetch("/api/scheduler/v1/admin/tenants")).status);
  assert.equal(status, 403);
  await context.close();
});

test("the admin key sees every tenant on the admin page", async () => {
  const { context, page } = await signedIn(browser, E2E.admin_key, { path: "/admin" });
  await page.getByRole("heading", { level: 1, name: /admin/i }).waitFor();
  for (const tenant of Object.keys(E2E.tenants)) {
    await page.getByRole("cell", { name: tenant, exact: true }).first().waitFor();
  }
  await context.close();
});
