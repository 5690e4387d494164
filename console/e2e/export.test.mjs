// The Costs page's CSV export downloads through the gateway with the session, and parses.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { call, E2E, launch, runningWorkload, signedIn, TENANT_A, until } from "./lib.mjs";

let browser;
before(async () => (browser = await launch()));
after(async () => browser?.close());

function parseCsv(text) {
  const rows = [];
  for (const line of text.trim().split(/\r?\n/)) {
    const cells = [];
    let cell = "";
    let quoted = false;
    for (let i = 0; i < line.length; i++) {
      const ch = line[i];
      if (quoted) {
        if (ch === '"' && line[i + 1] === '"') (cell += '"'), i++;
        else if (ch === '"') quoted = false;
        else cell += ch;
      } else if (ch === '"') quoted = true;
      else if (ch === ",") cells.push(cell), (cell = "");
      else cell += ch;
    }
    cells.push(cell);
    rows.push(cells);
  }
  return rows;
}

test("a CSV export is downloaded from the Costs page and parsed", async () => {
  const key = E2E.tenants[TENANT_A];
  await runningWorkload(key, { project: "vision" });
  await until(
    async () => {
      await call("POST", "billing", "/v1/admin/accrual", E2E.admin_key);
      return (await call("GET", "billing", "/v1/charges?limit=10", key)).length > 0;
    },
    { timeout: 60_000, every: 2000, what: "a charge to accrue" },
  );
  const { context, page } = await signedIn(browser, key, { path: "/costs" });
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("link", { name: /csv/i }).first().click(),
  ]);
  const rows = parseCsv(readFileSync(await download.path(), "utf8"));
  assert.ok(rows.length >= 2, `a header and at least one row, got ${rows.length}`);
  const header = rows[0];
  assert.ok(header.includes("project") || header.some((h) => /project/.test(h)), `header: ${header}`);
  assert.ok(rows.slice(1).every((r) => r.length === header.length), "every row has the header's columns");
  assert.match(download.suggestedFilename(), /\.csv$/);
  await context.close();
});
