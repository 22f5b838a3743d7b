// Issue 30: every screen at 1280 x 900 and at 1024 x 768, as a designer sees it, saved as
// test-results/console/console-NAME-WIDTH.png (docs/images/ with TROVE_UPDATE_SCREENSHOTS=1, the
// pictures docs/console.md and the README show). At each size nothing reaches past the window,
// and index.html's placeholder is gone.

import type { Page } from "puppeteer-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type ExampleProject, uploadExample } from "../insights/api-support.js";
import {
  type ConsoleRig,
  describeWithChromium,
  overflowing,
  screenshot,
  scrollWidth,
  signIn,
  startConsoleRig,
} from "./browser.js";

const SIZES = [
  { width: 1280, height: 900 },
  { width: 1024, height: 768 },
];

describeWithChromium("console screenshots at 1280 x 900 and 1024 x 768 (Chromium, issue 30)", (chromium) => {
  let rig: ConsoleRig;
  let auth: Record<string, string>;
  let example: ExampleProject;
  let report = "";
  beforeAll(async () => {
    rig = await startConsoleRig(chromium);
    auth = { Authorization: `Bearer ${await rig.token()}` };
    example = await uploadExample(rig.url, "acme-letters", auth);
    const put = (path: string, body: string, type = "text/plain") =>
      fetch(`${rig.url}/resources/v2/data/home/${path}`, {
        method: "PUT",
        headers: { ...auth, "Content-Type": type },
        body,
      });
    await put("letters/", "");
    await put("letters/welcome.txt", "Dear Ana,\nthank you for your order.\nKind regards\n");
    await put("letters/welcome.txt", "Dear Ana,\nthank you for your second order.\nKind regards\nThe team\n");
    await put("letters/invoice.template", "{}", "application/vnd.trove.template+json");
    await put("letters/header.block", "{}", "application/vnd.trove.content-block+json");
    await put("letters/brand.theme", "{}", "application/vnd.trove.theme+json");
    await put("letters/logo.svg", "<svg/>", "image/svg+xml");
  }, 180_000);
  afterAll(async () => {
    await rig?.close();
  });

  /** At each size: the screen fits the window, the placeholder is gone, and the picture is saved. */
  async function shoot(page: Page, name: string, ready: () => Promise<unknown>): Promise<void> {
    for (const size of SIZES) {
      await page.setViewport(size);
      await page.waitForFunction(`window.innerWidth === ${size.width}`);
      await ready();
      expect(await page.evaluate(`document.body.innerText.includes("Loading the Trove console")`)).toBe(false);
      expect(
        await scrollWidth(page),
        `${name} at ${size.width}: ${(await overflowing(page)).join(", ")}`,
      ).toBeLessThanOrEqual(size.width);
      await screenshot(page, `${name}-${size.width}`);
    }
  }

  it("sign-in, stores, browse, history, a folder as of a moment", async () => {
    const { page, url } = rig;
    await page.goto(`${url}/console/`);
    await shoot(page, "sign-in", () => page.waitForSelector("button::-p-text(Sign in)"));
    await signIn(page, url);
    await shoot(page, "stores", () => page.waitForSelector("table.stores tbody tr"));
    await page.goto(`${url}/console/browse/home/letters/`);
    await shoot(page, "browse", async () => {
      await page.waitForSelector('tr[data-name="welcome.txt"]');
      await page.waitForSelector(".live.connected");
    });
    await page.locator("button.link::-p-text(welcome.txt)").click();
    await page.locator("dialog button::-p-text(History)").click();
    await page.waitForSelector("table.history tbody tr");
    await page.locator("button::-p-text(Compare Old and New)").click();
    await shoot(page, "history", () => page.waitForSelector("table.diff tbody tr"));
    await page.keyboard.press("Escape");
    // A moment, then changes after it: the folder as it was, and what restoring it would do.
    const moment = new Date().toISOString();
    while (new Date().toISOString() === moment) await new Promise((r) => setTimeout(r, 1));
    await fetch(`${url}/resources/v2/data/home/letters/logo.svg`, { method: "DELETE", headers: auth });
    await fetch(`${url}/resources/v2/data/home/letters/draft.txt`, { method: "PUT", headers: auth, body: "draft" });
    await page.goto(`${url}/console/browse/home/letters/?as-of=${encodeURIComponent(moment)}`);
    await shoot(page, "as-of", () => page.waitForSelector('tr[data-name="logo.svg"]'));
    await page.waitForSelector(".as-of-banner");
    await page.locator("button::-p-text(Restore this folder as it was)").click();
    await shoot(page, "restore-folder", () => page.waitForSelector("dialog[open] ul.restore-plan li"));
    await page.keyboard.press("Escape");
  }, 180_000);

  it("insights: projects, a project, an environment's reports, a report's tabs, the graph, promotion", async () => {
    const { page, url } = rig;
    const env = `${url}/console/insights/${example.projectID}/${example.environments.draft}`;
    await page.goto(`${url}/console/insights`);
    await shoot(page, "insights-projects", () => page.waitForSelector("table.projects tbody tr"));
    await page.goto(env);
    await page.locator("button::-p-text(Create report)").click();
    await page.waitForSelector("table.reports tbody tr:first-child .state.generated", { timeout: 60_000 });
    report = (await page.$eval("table.reports tbody tr:first-child", (tr) => tr.getAttribute("data-report"))) ?? "";
    await shoot(page, "insights-reports", () => page.waitForSelector("table.reports tbody tr"));
    await page.goto(`${env}/${report}`);
    await shoot(page, "insights", () => page.waitForSelector("h3::-p-text(Cycles: 1)"));
    await page.goto(`${env}/${report}/resources`);
    await shoot(page, "insights-resources", () => page.waitForSelector("table.report tbody tr"));
    await page.goto(`${env}/${report}/graph?show=problems`);
    await shoot(page, "insights-graph", () => page.waitForSelector(".graph-canvas svg g.node.missing"));
    await page.goto(
      `${env}/${report}/graph?path=${encodeURIComponent("/templates/letters/direct-debit-mandate.template")}`,
    );
    await shoot(page, "insights-graph-resource", () => page.waitForSelector(".graph-canvas svg g.node"));
    await page.goto(`${url}/console/insights/${example.projectID}`);
    await page.locator('button[aria-label="Promote from draft…"]').click();
    await shoot(page, "insights-promote", () => page.waitForSelector("ul.promote-preview li"));
  }, 180_000);
});
