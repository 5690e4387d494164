// The admin's GPU list is the whole fleet: only the rows near the view are rendered and streamed, and a row
// scrolled into view joins the stream and shows live values.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { E2E, launch, signedIn } from "./lib.mjs";

let browser;
before(async () => {
  browser = await launch();
});
after(async () => browser?.close());

test("the fleet's GPU list renders the rows near the view, and a row scrolled to goes live", async () => {
  const { context, page } = await signedIn(browser, E2E.admin_key, { path: "/gpus" });
  try {
    const table = page.getByRole("table", { name: "GPUs" });
    await table.waitFor();
    const listed = Number(await table.getAttribute("aria-rowcount")) - 1;
    const rendered = await page.locator('table[aria-label="GPUs"] tbody tr[aria-rowindex]').count();
    assert.ok(listed >= 64, `the admin lists the fleet (${listed} GPUs)`);
    assert.ok(rendered > 0 && rendered < listed, `${rendered} of ${listed} rows rendered`);

    await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    await page.locator(`table[aria-label="GPUs"] tbody tr[aria-rowindex="${listed + 1}"]`).waitFor({ timeout: 5_000 });
    // The lowest live row now rendered (one not rendered at first) gains points from the stream reopened with
    // the rows now shown.
    const spark = page.locator('table[aria-label="GPUs"] tbody tr[aria-rowindex] [role="img"][aria-label^="Compute utilisation of "]').last();
    const index = Number(await spark.locator("xpath=ancestor::tr[1]").getAttribute("aria-rowindex"));
    assert.ok(index > rendered + 1, `a row rendered only after the scroll (row ${index})`);
    await page.waitForFunction(
      (element) => /: [1-9]\d* points, latest /.test(element.getAttribute("aria-label") ?? ""),
      await spark.elementHandle(),
      { timeout: 10_000 },
    );
    const first = page.locator('table[aria-label="GPUs"] tbody tr[aria-rowindex="2"]');
    assert.equal(await first.count(), 0, "the first row, scrolled far away, is no longer rendered");
  } finally {
    await context.close();
  }
});
