// The console's stores screen in a real headless Chromium against a real Trove: create a store,
// see its type, features and settings, change a setting, delete it after a confirmation that
// says what is lost.

import { afterAll, beforeAll, expect, it } from "vitest";
import { type ConsoleRig, describeWithChromium, screenshot, signedInRig } from "./browser.js";

describeWithChromium("console stores (Chromium)", (chromium) => {
  let rig: ConsoleRig;
  let auth: Record<string, string>;
  beforeAll(async () => {
    ({ rig, auth } = await signedInRig(chromium));
  }, 120_000);
  afterAll(async () => {
    await rig?.close();
  });

  const storeJson = async (name: string) =>
    fetch(`${rig.url}/resources/v2/stores/${name}`, { headers: { ...auth, Accept: "application/json" } });

  it("creates a store, shows its type, features and settings, updates a setting, deletes it", async () => {
    const { page } = rig;
    await page.locator("button::-p-text(New store)").click();
    await page.locator("#store-name").fill("brand");
    await page.locator("#store-type").fill("snapshot");
    await page.locator("#setting-value-0").fill("3d");
    // History's setting is offered with its default (docs/history.md).
    expect(await page.$eval("#setting-name-1", (e) => (e as unknown as { value: string }).value)).toBe("keep-versions");
    await page.locator("#setting-value-1").fill("90d");
    await page.locator("dialog button::-p-text(Create)").click();
    await page.waitForSelector("[role=status]::-p-text(Store brand created.)");
    const row = async () =>
      page.$eval("tr:has(a[href='/console/browse/brand/'])", (tr) => [...tr.children].map((c) => c.textContent));
    const created = await row();
    expect(created.slice(0, 3)).toEqual(["brand", "snapshot", "sync, sync-snapshot"]);
    // Issue 30: the settings are folded to one line (retention first, the count), the rest behind it.
    const summary = "tr:has(a[href='/console/browse/brand/']) details summary";
    expect(await page.$eval(summary, (s) => s.textContent)).toMatch(
      /^keep-deleted 3d, keep-versions 90d · \d+ settings$/,
    );
    expect(await page.$eval("tr:has(a[href='/console/browse/brand/']) details", (d) => d.open)).toBe(false);
    // Every store is one line: the action cells line up with their rows.
    const rows = await page.$$eval("table.stores tbody tr", (trs) =>
      trs.map((tr) => {
        const r = tr.getBoundingClientRect();
        const cell = tr.querySelector("td.actions")?.getBoundingClientRect();
        const buttons = [...tr.querySelectorAll("td.actions button")].map((b) => b.getBoundingClientRect());
        return {
          height: r.height,
          cellTop: (cell?.top ?? 0) - r.top,
          cellBottom: r.bottom - (cell?.bottom ?? 0),
          middles: buttons.map((b) => Math.abs(b.top + b.height / 2 - (r.top + r.height / 2))),
        };
      }),
    );
    expect(rows.length).toBeGreaterThanOrEqual(2);
    for (const r of rows) {
      expect(r.height).toBeLessThan(56);
      expect(Math.abs(r.cellTop)).toBeLessThanOrEqual(1);
      expect(Math.abs(r.cellBottom)).toBeLessThanOrEqual(1);
      expect(r.middles).toHaveLength(2);
      for (const m of r.middles) expect(m).toBeLessThanOrEqual(2);
    }
    // The whole list on demand.
    await page.locator(summary).click();
    const settings = await page.$eval("tr:has(a[href='/console/browse/brand/']) dl", (dl) =>
      [...dl.querySelectorAll("dt")].map((dt) => `${dt.textContent} = ${dt.nextElementSibling?.textContent}`),
    );
    expect(settings).toContain("keep-deleted = 3d");
    expect(settings).toContain("keep-versions = 90d");
    await page.locator(summary).click();
    expect((await storeJson("brand")).status).toBe(200);
    await screenshot(page, "stores");

    await page.locator('button[aria-label="Edit brand"]').click();
    await page.locator("#setting-value-0").fill("1d");
    await page.locator("dialog button::-p-text(Save)").click();
    await page.waitForSelector("[role=status]::-p-text(Store brand updated.)");
    expect(await page.$eval(summary, (s) => s.textContent)).toMatch(/^keep-deleted 1d, /);

    // One resource in it: the confirmation counts it.
    const put = await fetch(`${rig.url}/resources/v2/data/brand/logo.svg`, {
      method: "PUT",
      headers: auth,
      body: "<svg/>",
    });
    expect(put.status).toBe(201);
    await page.locator('button[aria-label="Delete brand"]').click();
    await page.waitForSelector("dialog p::-p-text(1 resource or directory)");
    await page.locator("dialog button::-p-text(Delete brand)").click();
    await page.waitForSelector("[role=status]::-p-text(Store brand deleted.)");
    expect(await page.$("a[href='/console/browse/brand/']")).toBeNull();
    expect((await storeJson("brand")).status).toBe(404);
  });

  it("the header names the signed-in user (issue 30): the development issuer's subject", async () => {
    const { page } = rig;
    expect(await page.$eval("header .who", (e) => e.textContent)).toBe("Signed in as developer");
  });

  it("a store name the API refuses is said in the form, and nothing is created", async () => {
    const { page } = rig;
    await page.locator("button::-p-text(New store)").click();
    await page.locator("#store-name").fill("no/slash");
    await page.locator("dialog button::-p-text(Create)").click();
    await page.waitForSelector("dialog [role=alert]::-p-text(Name: a name cannot contain /)");
    await page.locator("#store-name").fill("home");
    await page.locator("dialog button::-p-text(Create)").click();
    await page.waitForSelector("dialog [role=alert]::-p-text(exist)");
    await page.locator("dialog button::-p-text(Cancel)").click();
  });
});
