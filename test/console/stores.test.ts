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
    expect(created[3]).toContain("keep-deleted = 3d");
    expect(created[3]).toContain("keep-versions = 90d");
    expect((await storeJson("brand")).status).toBe(200);
    await screenshot(page, "stores");

    await page.locator('button[aria-label="Edit brand"]').click();
    await page.locator("#setting-value-0").fill("1d");
    await page.locator("dialog button::-p-text(Save)").click();
    await page.waitForSelector("[role=status]::-p-text(Store brand updated.)");
    expect((await row())[3]).toContain("keep-deleted = 1d");

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
