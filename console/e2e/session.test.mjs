// Signing in turns an API key into an HttpOnly, SameSite=Strict cookie; unsafe calls need the CSRF token;
// signing out ends the session at the gateway, not only in the tab.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { E2E, launch, signedIn, TENANT_A } from "./lib.mjs";

let browser;
before(async () => (browser = await launch()));
after(async () => browser?.close());

test("a wrong key is refused at the field, and no session cookie is set", async () => {
  const context = await browser.newContext({ baseURL: E2E.gateway });
  const page = await context.newPage();
  await page.goto("/");
  await page.getByLabel("API key").fill("not-a-key");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "Sign-in refused" }).waitFor();
  assert.equal((await context.cookies()).find((c) => c.name === "gpucloud_session"), undefined);
  await context.close();
});

test("a good key signs in with an HttpOnly, SameSite=Strict session cookie", async () => {
  const { context, page } = await signedIn(browser, E2E.tenants[TENANT_A]);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === "gpucloud_session");
  const csrf = cookies.find((c) => c.name === "gpucloud_csrf");
  assert.ok(session, "session cookie set");
  assert.equal(session.httpOnly, true);
  assert.equal(session.sameSite, "Strict");
  assert.ok(!session.value.includes(E2E.tenants[TENANT_A]), "the cookie is not the key");
  assert.equal(csrf.httpOnly, false);
  // The page's script cannot read the session cookie.
  assert.ok(!(await page.evaluate(() => document.cookie)).includes("gpucloud_session"));
  await page.getByRole("heading", { level: 1 }).first().waitFor();
  await context.close();
});

test("an unsafe call without the CSRF token is refused and changes nothing", async () => {
  const { context, page } = await signedIn(browser, E2E.tenants[TENANT_A]);
  const outcome = await page.evaluate(async () => {
    const body = JSON.stringify({
      matchers: [{ name: "alertname", op: "=", value: "CsrfProbe" }],
      ends_at: new Date(Date.now() + 3600_000).toISOString(),
      comment: "must not be created",
    });
    const refused = await fetch("/api/alerting/v1/silences", { method: "POST", body, headers: { "Content-Type": "application/json" } });
    const list = await (await fetch("/api/alerting/v1/silences")).json();
    return { status: refused.status, created: JSON.stringify(list).includes("CsrfProbe") };
  });
  assert.equal(outcome.status, 403);
  assert.equal(outcome.created, false);
  await context.close();
});

test("signing out ends the session at the gateway", async () => {
  const { context, page } = await signedIn(browser, E2E.tenants[TENANT_A]);
  const before = await context.cookies();
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("API key").waitFor();
  // The old cookie, replayed by another client, no longer works.
  const stale = before.find((c) => c.name === "gpucloud_session");
  const replay = await fetch(`${E2E.gateway}/api/session`, { headers: { Cookie: `gpucloud_session=${stale.value}` } });
  assert.equal(replay.status, 401);
  await context.close();
});
