// The console's browse screen in a real headless Chromium against a real Trove: create a
// directory, upload two files by drag and drop, see them listed with their sizes, see a change made
// from outside the page arrive by itself (WatchChanges), meet a stale save ("changed since you
// opened it"), and delete the directory after a confirmation that counts what goes.

import type { Page } from "puppeteer-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type ConsoleRig, describeWithChromium, screenshot, signedInRig } from "./browser.js";

/** The text of the listing's rows, by name: [type, size, ...]. */
async function rowText(page: Page, name: string): Promise<string[]> {
  return page.$eval(`tr[data-name="${name}"]`, (row) =>
    [...row.querySelectorAll("td")].map((td) => td.textContent ?? ""),
  );
}

async function waitForRow(page: Page, name: string): Promise<void> {
  await page.waitForSelector(`tr[data-name="${name}"]`, { timeout: 15_000 });
}

describeWithChromium("console browse (Chromium)", (chromium) => {
  let rig: ConsoleRig;
  let auth: Record<string, string>;
  beforeAll(async () => {
    ({ rig, auth } = await signedInRig(chromium));
  }, 120_000);
  afterAll(async () => {
    await rig?.close();
  });

  const rest = (path: string, init: RequestInit = {}) =>
    fetch(`${rig.url}/resources/v2/data/home/${path}`, { ...init, headers: { ...auth, ...init.headers } });

  it("creates a directory and uploads two files into it by drag and drop; the listing shows their sizes", async () => {
    const { page } = rig;
    await page.locator("a::-p-text(home)").click();
    await page.waitForSelector("h1::-p-text(/)");

    await page.locator("button::-p-text(New folder)").click();
    await page.locator("#folder-name").fill("designs");
    await page.locator("dialog button[type=submit]").click();
    await waitForRow(page, "designs");
    expect((await rowText(page, "designs"))[1]).toBe("folder");
    expect((await rest("designs")).status).toBe(200);

    await page.locator("a::-p-text(designs/)").click();
    await page.waitForSelector("h1::-p-text(/designs)");
    await page.evaluate(`(() => {
      const data = new DataTransfer();
      data.items.add(new File(["x".repeat(1200)], "letter.txt", { type: "text/plain" }));
      data.items.add(new File(['{"theme":"blue"}'], "theme.json", { type: "application/json" }));
      document.querySelector("section.directory").dispatchEvent(
        new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }),
      );
    })()`);
    await waitForRow(page, "letter.txt");
    await waitForRow(page, "theme.json");
    const letter = await rowText(page, "letter.txt");
    const theme = await rowText(page, "theme.json");
    // Issue 30: the type's readable form on screen, the media type in the tooltip.
    expect(letter.slice(1, 3)).toEqual(["text", "1.2 KiB"]);
    expect(theme.slice(1, 3)).toEqual(["JSON", "16 B"]);
    expect(await page.$eval('tr[data-name="theme.json"] td.type [title]', (e) => e.getAttribute("title"))).toBe(
      "application/json",
    );
    await page.waitForSelector(".uploads li.done:nth-child(2)");
    // What the server holds, as another client sees it.
    expect(await (await rest("designs/theme.json")).text()).toBe('{"theme":"blue"}');
    expect((await (await rest("designs/letter.txt")).arrayBuffer()).byteLength).toBe(1200);
  });

  it("a REST PUT from outside the page appears in the open listing by itself, and in the feed", async () => {
    const { page } = rig;
    await page.waitForSelector(".live.connected");
    const put = await rest("designs/from-outside.txt", { method: "PUT", body: "hello from curl" });
    expect(put.status).toBe(201);
    // Generous: the machine is shared; the stream delivers it as soon as it is written.
    await waitForRow(page, "from-outside.txt");
    expect((await rowText(page, "from-outside.txt"))[2]).toBe("15 B");
    await page.waitForSelector(".feed li::-p-text(/designs/from-outside.txt)");
    expect(await page.$eval(".live", (e) => e.textContent)).toBe("Live: connected");
    // Issue 30: the feed shows when the change was made, from the server (the instant of the
    // resource's state, to the millisecond, as the listing has it), not when the page received it.
    const feedInstant = await page.$$eval(".feed li", (items) =>
      items
        .find((li) => li.textContent?.includes("/designs/from-outside.txt"))
        ?.querySelector("time")
        ?.getAttribute("datetime"),
    );
    const rowInstant = await page.$eval('tr[data-name="from-outside.txt"] td.modified time', (t) =>
      t.getAttribute("datetime"),
    );
    expect(feedInstant).toBe(rowInstant);
    await screenshot(page, "browse");
  });

  it("the Type column names the design-resource kinds (issue 30: template, block, plugin, data model, theme)", async () => {
    const { page } = rig;
    const kinds: Array<[string, string, string]> = [
      ["invoice.template", "application/vnd.trove.template+json", "template"],
      ["header.block", "application/vnd.trove.content-block+json", "block"],
      ["qr.plugin", "application/vnd.trove.pluggable-object+json", "plugin"],
      ["customer.datamodel", "application/vnd.trove.data-model+json", "data model"],
      ["blue.theme", "application/vnd.trove.theme+json", "theme"],
    ];
    for (const [name, type] of kinds) {
      const put = await rest(`designs/${name}`, { method: "PUT", body: "{}", headers: { "Content-Type": type } });
      expect(put.status).toBe(201);
    }
    for (const [name, type, label] of kinds) {
      await waitForRow(page, name);
      expect((await rowText(page, name))[1], name).toBe(label);
      expect(await page.$eval(`tr[data-name="${name}"] td.type [title]`, (e) => e.getAttribute("title"))).toBe(type);
    }
  });

  it("a save over a version changed since it was opened shows the conflict, then overwrites on request", async () => {
    const { page } = rig;
    await page.locator("button.link::-p-text(theme.json)").click();
    await page.waitForSelector("#viewer-text");
    expect(await page.$eval("#viewer-text", (e) => (e as unknown as { value: string }).value)).toBe('{"theme":"blue"}');
    // Someone else changes it meanwhile.
    expect((await rest("designs/theme.json", { method: "PUT", body: '{"theme":"red"}' })).status).toBe(200);
    await page.locator("#viewer-text").fill('{"theme":"green"}');
    await page.locator("dialog button::-p-text(Save)").click();
    await page.waitForSelector(".conflict::-p-text(Changed since you opened it)");
    await screenshot(page, "conflict");
    // Nothing was replaced.
    expect(await (await rest("designs/theme.json")).text()).toBe('{"theme":"red"}');

    await page.locator(".conflict button::-p-text(Overwrite)").click();
    await page.waitForSelector("dialog .status::-p-text(Saved.)");
    expect(await (await rest("designs/theme.json")).text()).toBe('{"theme":"green"}');
    await page.locator("dialog button::-p-text(Close)").click();
  });

  it("deletes the directory after a confirmation that counts what goes", async () => {
    const { page } = rig;
    await page.locator("nav.crumbs a::-p-text(home)").click();
    await page.waitForSelector("h1 ::-p-text(/)");
    await waitForRow(page, "designs");
    await page.locator('button[aria-label="Delete designs"]').click();
    await page.waitForSelector("dialog p::-p-text(8 files and 0 folders)");
    await screenshot(page, "delete");
    await page.locator("dialog button.danger::-p-text(Delete)").click();
    await page.waitForFunction(`!document.querySelector('tr[data-name="designs"]')`, { timeout: 15_000 });
    expect((await rest("designs/letter.txt")).status).toBe(404);

    // Deleted entries on demand.
    await page.locator("label::-p-text(Show deleted) input").click();
    await page.waitForSelector('tr.deleted[data-name="designs"]');
  });
});
