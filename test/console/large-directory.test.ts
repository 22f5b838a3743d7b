// A directory of 10,000 entries in the console (real Chromium, real Trove): the listing holds them
// all (aria-rowcount) but renders only the rows in view, scrolls to the last one, and sorts.

import { afterAll, beforeAll, expect, it } from "vitest";
import { type ConsoleRig, describeWithChromium, signIn, startConsoleRig } from "./browser.js";

const COUNT = 10_000;

describeWithChromium("console with 10,000 entries (Chromium)", (chromium) => {
  let rig: ConsoleRig;
  beforeAll(async () => {
    rig = await startConsoleRig(chromium);
    const auth = { Authorization: `Bearer ${await rig.token()}` };
    const mk = await fetch(`${rig.url}/resources/v2/data/home/big/`, { method: "PUT", headers: auth });
    expect(mk.status).toBe(201);
    let next = 0;
    const worker = async () => {
      while (next < COUNT) {
        const i = next++;
        const res = await fetch(`${rig.url}/resources/v2/data/home/big/f${i}.txt`, {
          method: "PUT",
          headers: auth,
          body: "x".repeat(i % 100),
        });
        if (res.status !== 201) throw new Error(`PUT f${i}.txt: ${res.status}`);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    await signIn(rig.page, rig.url);
  }, 300_000);
  afterAll(async () => {
    await rig?.close();
  });

  it("lists them all, renders a window of rows, scrolls to the end and sorts by size", async () => {
    const { page, url } = rig;
    await page.goto(`${url}/console/browse/home/big`);
    await page.waitForSelector('tr[data-name="f0.txt"]', { timeout: 60_000 });
    expect(await page.$eval("table.listing", (t) => t.getAttribute("aria-rowcount"))).toBe(String(COUNT + 1));
    const rendered = await page.$$eval("table.listing tbody tr[data-name]", (rows) => rows.length);
    expect(rendered).toBeGreaterThan(5);
    expect(rendered).toBeLessThan(100);

    // Natural order: f9999 is last; scrolled to the bottom it is rendered, f0 is not.
    await page.$eval("table.listing tbody", (b) => {
      b.scrollTop = b.scrollHeight;
    });
    await page.waitForSelector('tr[data-name="f9999.txt"]');
    expect(await page.$('tr[data-name="f0.txt"]')).toBeNull();

    // Sorting by size, descending: a 99-byte file comes first.
    await page.$eval("table.listing tbody", (b) => {
      b.scrollTop = 0;
    });
    await page.locator("th.size button").click();
    await page.locator("th.size button").click();
    await page.waitForSelector('th.size[aria-sort="descending"]');
    const first = await page.$eval("table.listing tbody tr[data-name]", (r) => r.querySelector("td.size")?.textContent);
    expect(first).toBe("99 B");
  });
});
