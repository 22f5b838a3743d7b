// The console in a real headless Chromium against a real Trove: `/` leads to the console, the
// development issuer's page signs the user in with one click (authorization code with PKCE), and
// signing out forgets the tokens.

import { afterAll, beforeAll, expect, it } from "vitest";
import { type ConsoleRig, describeWithChromium, screenshot, signIn, startConsoleRig, tokenSubject } from "./browser.js";

describeWithChromium("console sign-in (Chromium)", (chromium) => {
  let rig: ConsoleRig;
  beforeAll(async () => {
    rig = await startConsoleRig(chromium);
  }, 120_000);
  afterAll(async () => {
    await rig?.close();
  });

  it("/ redirects to the console, which signs in through the development issuer's page and lists the stores", async () => {
    const { page, url } = rig;
    await page.goto(`${url}/`);
    expect(page.url()).toBe(`${url}/console/`);
    await page.waitForSelector("button::-p-text(Sign in)");
    await screenshot(page, "sign-in");

    await signIn(page, url);
    // Back on the console, without the code in the address bar, with the stores listed.
    expect(page.url()).toBe(`${url}/console/`);
    await page.waitForSelector("a::-p-text(home)");
    const tokens = (await page.evaluate(`sessionStorage.getItem("trove.console.tokens")`)) as string | null;
    expect(JSON.parse(tokens ?? "{}")).toMatchObject({ source: "flow", refreshToken: expect.any(String) });

    await page.locator("button::-p-text(Sign out)").click();
    await page.waitForSelector("button::-p-text(Sign in)");
    expect(await page.evaluate(`sessionStorage.getItem("trove.console.tokens")`)).toBeNull();
  });

  it("a pasted token signs in too", async () => {
    const { page, url } = rig;
    await page.goto(`${url}/console/`);
    await page.locator("summary::-p-text(Paste a token instead)").click();
    const token = await rig.token();
    await page.locator("#pasted-token").fill(token);
    await page.locator("button::-p-text(Use this token)").click();
    await page.waitForSelector("a::-p-text(home)");
    // Issue 30: the header names the user, here the token's subject (a client_credentials token's client id).
    const sub = tokenSubject(token);
    expect(sub).toMatch(/^trove-dev-/);
    expect(await page.$eval("header .who", (e) => e.textContent)).toBe(`Signed in as ${sub} (pasted token)`);
  });
});
