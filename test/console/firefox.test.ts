// Issue 15, "works in Chromium and Firefox": the console's sign-in and browse flow in a real headless
// Firefox (the Debian package firefox-esr), driven by puppeteer-core over WebDriver BiDi, against a
// real Trove: sign in through the development issuer's page, create a directory, upload two files
// by drag and drop, see them listed with their sizes, and read what the server holds.

import type { Page } from "puppeteer-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { axeViolations, type ConsoleRig, describeWithFirefox, screenshot, signIn, startConsoleRig } from "./browser.js";

async function rowText(page: Page, name: string): Promise<string[]> {
  return page.$eval(`tr[data-name="${name}"]`, (row) =>
    [...row.querySelectorAll("td")].map((td) => td.textContent ?? ""),
  );
}

describeWithFirefox("console in Firefox (WebDriver BiDi)", (firefox) => {
  let rig: ConsoleRig;
  let auth: Record<string, string>;
  beforeAll(async () => {
    rig = await startConsoleRig(firefox, { browser: "firefox", viewport: { width: 1024, height: 768 } });
    auth = { Authorization: `Bearer ${await rig.token()}` };
  }, 120_000);
  afterAll(async () => {
    await rig?.close();
  });

  const rest = (path: string, init: RequestInit = {}) =>
    fetch(`${rig.url}/resources/v2/data/home/${path}`, { ...init, headers: { ...auth, ...init.headers } });

  it("signs in through the development issuer's page (code flow with PKCE) and lists the stores", async () => {
    const { page, url } = rig;
    expect((await rig.browser.version()).toLowerCase()).toContain("firefox");
    await page.goto(`${url}/`);
    expect(page.url()).toBe(`${url}/console/`);
    await signIn(page, url);
    expect(page.url()).toBe(`${url}/console/`);
    await page.waitForSelector("a::-p-text(home)");
    const tokens = (await page.evaluate(`sessionStorage.getItem("trove.console.tokens")`)) as string | null;
    expect(JSON.parse(tokens ?? "{}")).toMatchObject({ source: "flow", refreshToken: expect.any(String) });
  });

  it("creates a directory, uploads two files into it by drag and drop, and lists them with their sizes", async () => {
    const { page } = rig;
    await page.locator("a::-p-text(home)").click();
    await page.waitForSelector("h1::-p-text(/)");
    await page.locator("button::-p-text(New folder)").click();
    await page.locator("#folder-name").fill("firefox");
    await page.locator("dialog button[type=submit]").click();
    await page.waitForSelector('tr[data-name="firefox"]', { timeout: 15_000 });
    expect((await rowText(page, "firefox"))[1]).toBe("folder");
    expect((await rest("firefox")).status).toBe(200);

    await page.locator("a::-p-text(firefox/)").click();
    await page.waitForSelector("h1::-p-text(/firefox)");
    await page.evaluate(`(() => {
      const data = new DataTransfer();
      data.items.add(new File(["x".repeat(1200)], "letter.txt", { type: "text/plain" }));
      data.items.add(new File(['{"theme":"blue"}'], "theme.json", { type: "application/json" }));
      document.querySelector("section.directory").dispatchEvent(
        new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }),
      );
    })()`);
    await page.waitForSelector('tr[data-name="letter.txt"]', { timeout: 15_000 });
    await page.waitForSelector('tr[data-name="theme.json"]', { timeout: 15_000 });
    await page.waitForSelector(".uploads li.done:nth-child(2)");
    expect((await rowText(page, "letter.txt")).slice(1, 3)).toEqual(["text", "1.2 KiB"]);
    expect((await rowText(page, "theme.json")).slice(1, 3)).toEqual(["JSON", "16 B"]);
    expect(await (await rest("firefox/theme.json")).text()).toBe('{"theme":"blue"}');
    expect((await (await rest("firefox/letter.txt")).arrayBuffer()).byteLength).toBe(1200);

    // The live stream works here too: a change from outside appears by itself.
    await page.waitForSelector(".live.connected");
    expect((await rest("firefox/from-outside.txt", { method: "PUT", body: "hello" })).status).toBe(201);
    await page.waitForSelector('tr[data-name="from-outside.txt"]', { timeout: 15_000 });

    // 1024 px wide, nothing overflows; axe finds nothing serious in Firefox either.
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(1024);
    expect(await axeViolations(page)).toEqual([]);
    await screenshot(page, "browse-firefox");
  });
});
