// Issue 30, insights as an application (docs/console.md "Insights"), in a real headless Chromium
// and a real headless Firefox against a real Trove with the example project (examples/acme-letters):
// project → environment → its reports → one report, each with its own URL (the back button, a deep
// link opened in a new tab); the report's tabs (Problems first, Resources with chips, filter and
// sort, Dependencies, Graph); a report's progress where it was asked for; the graph opened on the
// problems or a resource, fitted whole, with its legend, its exports downloaded as files; promotion
// previewed (the comparison query) before it runs.

import type { Page } from "puppeteer-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type ExampleProject, uploadExample } from "../insights/api-support.js";
import {
  axeViolations,
  type BrowserKind,
  type ConsoleRig,
  describeWithBrowser,
  graphFitsFrame,
  screenshot,
  signIn,
  startConsoleRig,
} from "./browser.js";

const path = (page: Page) => {
  const u = new URL(page.url());
  return u.pathname + u.search;
};

/**
 * What the page saves as downloads (the console's saveAs clicks an <a download> on a blob URL): the
 * file names and texts. The blobs are kept as they are made (the console's CSP lets no fetch read a
 * blob: URL, rightly).
 */
async function captureDownloads(page: Page): Promise<void> {
  await page.evaluate(`(() => {
    window.__downloads = [];
    const blobs = new Map();
    const make = URL.createObjectURL;
    URL.createObjectURL = (blob) => {
      const url = make(blob);
      blobs.set(url, blob);
      return url;
    };
    const click = HTMLAnchorElement.prototype.click;
    HTMLAnchorElement.prototype.click = function () {
      const blob = blobs.get(this.href);
      if (!this.download || !blob) return click.call(this);
      window.__downloads.push(blob.text().then((text) => ({ name: this.download, text })));
    };
  })()`);
}
async function downloads(page: Page): Promise<{ name: string; text: string }[]> {
  return page.evaluate("Promise.all(window.__downloads)") as Promise<{ name: string; text: string }[]>;
}

for (const kind of ["chromium", "firefox"] as BrowserKind[]) {
  const title = kind === "chromium" ? "Chromium" : "Firefox";
  describeWithBrowser(kind, `console insights (${title}, issue 30)`, (executable) => {
    let rig: ConsoleRig;
    let auth: Record<string, string>;
    let example: ExampleProject;
    let draftReport = "";
    beforeAll(async () => {
      rig = await startConsoleRig(executable, { browser: kind, viewport: { width: 1280, height: 900 } });
      auth = { Authorization: `Bearer ${await rig.token()}` };
      example = await uploadExample(rig.url, "acme-letters", auth);
      await signIn(rig.page, rig.url);
    }, 120_000);
    afterAll(async () => {
      await rig?.close();
    });

    it("goes project → environment → reports → report, each its own URL; a new report shows its progress in its row", async () => {
      const { page, url } = rig;
      const { projectID, environments } = example;
      await page.goto(`${url}/console/insights`);
      await page.locator("table.projects a::-p-text(acme-letters)").click();
      await page.waitForSelector("h1::-p-text(Project acme-letters)");
      expect(path(page)).toBe(`/console/insights/${projectID}`);
      await page.locator("table.environments a::-p-text(draft)").click();
      await page.waitForSelector("h1::-p-text(Environment draft)");
      expect(path(page)).toBe(`/console/insights/${projectID}/${environments.draft}`);
      await page.waitForSelector("table.reports td::-p-text(No reports yet)");

      await page.locator("button::-p-text(Create report)").click();
      // The new report's row, at the top of the list beside the button, follows it to generated.
      await page.waitForSelector("table.reports tbody tr:first-child .state.generated", { timeout: 60_000 });
      expect(await page.$eval(".report-progress", (e) => e.textContent)).toMatch(/^Report [0-9a-f]{8}: generated\.$/);
      const row = await page.$eval("table.reports tbody tr:first-child", (tr) => ({
        id: tr.getAttribute("data-report") ?? "",
        cells: [...tr.children].map((c) => c.textContent ?? ""),
      }));
      draftReport = row.id;
      expect(row.cells[1]).toBe("generated");
      expect(row.cells[2]).toBe("developer");
      // Expires 90 days after it was generated (docs/insights.md).
      const created = Date.parse(row.cells[3]?.replace(" ", "T") ?? "");
      const expires = Date.parse(row.cells[4]?.replace(" ", "T") ?? "");
      expect(Math.round((expires - created) / 86_400_000)).toBe(90);

      await page.locator(`table.reports a::-p-text(${draftReport.slice(0, 8)})`).click();
      await page.waitForSelector("h3::-p-text(Missing references: 1)");
      expect(path(page)).toBe(`/console/insights/${projectID}/${environments.draft}/${draftReport}`);
      // Problems first: the missing block and the cycle.
      expect(await page.$eval("nav.tabs a[aria-current=page]", (a) => a.textContent)).toBe("Problems");
      expect(await page.$eval("table.missing tbody tr", (tr) => tr.textContent)).toContain(
        "/blocks/legal/sepa-terms.block",
      );
      await page.waitForSelector("h3::-p-text(Cycles: 1)");
      const cycle = await page.$eval("ol.cycles li", (li) => li.textContent ?? "");
      expect(cycle).toContain("cross-sell-offer.block");
      expect(cycle).toContain("loyalty-discount.block");
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `insights-problems-${kind}`);

      // The back button returns to the environment's reports, forward to the report.
      await page.goBack();
      await page.waitForSelector("h1::-p-text(Environment draft)");
      expect(path(page)).toBe(`/console/insights/${projectID}/${environments.draft}`);
      await page.goForward();
      await page.waitForSelector("h3::-p-text(Missing references: 1)");
    }, 120_000);

    it("the Resources tab: type chips, paths that wrap at /, filter and sort; a resource's dependencies and dependents", async () => {
      const { page } = rig;
      await page.locator("nav.tabs a::-p-text(Resources)").click();
      await page.waitForSelector("table.report tbody tr");
      expect(path(page)).toMatch(/\/resources$/);
      expect(await page.$$eval("table.report tbody tr", (trs) => trs.length)).toBe(55);
      const welcome = "/templates/letters/welcome-letter.template";
      const chip = await page.$eval(`tr[data-path="${welcome}"] .chip`, (c) => ({
        text: c.textContent,
        cls: c.className,
      }));
      expect(chip).toEqual({ text: "template", cls: "chip kind-template" });
      // A path's <wbr>s are after its slashes: it wraps there, never inside a name.
      expect(await page.$$eval(`tr[data-path="${welcome}"] th code.path wbr`, (w) => w.length)).toBe(3);
      expect(await page.$eval("table.report", (t) => t.scrollWidth <= t.clientWidth + 1)).toBe(true);

      await page.locator("#resource-filter").fill("marketing");
      await page.waitForFunction(`document.querySelectorAll("table.report tbody tr").length < 55`);
      const marketing = await page.$$eval("table.report tbody tr", (trs) =>
        trs.map((tr) => tr.getAttribute("data-path")),
      );
      expect(marketing.length).toBeGreaterThan(1);
      expect(marketing.every((p) => p?.includes("marketing"))).toBe(true);
      // Emptied by the keyboard, as a user does.
      await page.$eval("#resource-filter", (input) => (input as unknown as { select(): void }).select());
      await page.keyboard.press("Backspace");
      await page.waitForFunction(`document.querySelectorAll("table.report tbody tr").length === 55`);
      await page.select("#resource-type", "template");
      await page.waitForFunction(`document.querySelectorAll("table.report tbody tr").length < 55`);
      expect(await page.$$eval("table.report .chip", (cs) => [...new Set(cs.map((c) => c.textContent))])).toEqual([
        "template",
      ]);
      await page.locator("th button::-p-text(References)").click();
      await page.locator("th button::-p-text(References)").click();
      expect(await page.$eval("th[aria-sort]", (th) => th.getAttribute("aria-sort"))).toBe("descending");
      const counts = await page.$$eval("table.report tbody tr td:nth-of-type(3)", (tds) =>
        tds.map((td) => Number.parseInt(td.textContent ?? "0", 10)),
      );
      expect(counts).toEqual([...counts].sort((a, b) => b - a));
      await page.select("#resource-type", "");

      // A resource's dependencies and dependents, from its link.
      await page.locator(`tr[data-path="/blocks/marketing/cross-sell-offer.block"] th a`).click();
      await page.waitForSelector("section[aria-label='Dependents (what uses it)'] li");
      expect(path(page)).toContain("/related?path=%2Fblocks%2Fmarketing%2Fcross-sell-offer.block");
      expect(await page.$eval("section[aria-label='Dependents (what uses it)']", (s) => s.textContent ?? "")).toContain(
        "loyalty-discount.block",
      );
      expect(await axeViolations(page)).toEqual([]);
    }, 120_000);

    it("the graph opens on the problems, fitted whole, with a legend; a resource's neighbourhood has its URL; exports download files", async () => {
      const { page } = rig;
      await page.locator("nav.tabs a::-p-text(Problems)").click();
      await page.locator("a::-p-text(Show the problems in the graph)").click();
      await page.waitForSelector(".graph svg[data-direction] g.node");
      expect(path(page)).toMatch(/\/graph\?show=problems$/);
      const nodes = await page.$$eval("svg g.node", (gs) => gs.map((g) => g.getAttribute("data-path")));
      // Not the hairball: the missing block, who refers to it, and the cycle.
      expect(nodes.length).toBeLessThan(12);
      expect(nodes).toContain("/blocks/legal/sepa-terms.block");
      expect(nodes).toContain("/blocks/marketing/cross-sell-offer.block");
      expect(nodes).toContain("/blocks/marketing/loyalty-discount.block");
      // Fit all: the whole drawing in the frame, centred problems included.
      expect(await graphFitsFrame(page)).toBe(true);
      const legend = await page.$$eval("ul.legend li", (lis) => lis.map((li) => li.textContent));
      expect(legend).toEqual(["template", "block", "plugin", "data model", "theme", "other", "missing", "on a cycle"]);
      const width = async () => Number(await page.$eval(".graph-canvas > svg", (s) => s.getAttribute("width")));
      const fitted = await width();
      await page.locator("button::-p-text(Zoom in)").click();
      await page.locator("button::-p-text(Zoom in)").click();
      expect(await width()).toBeGreaterThan(fitted);
      await page.locator("button::-p-text(Fit all)").click();
      expect(await width()).toBe(fitted);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `insights-graph-${kind}`);

      // A resource's neighbourhood: its own URL; the kinds drawn in their shapes.
      const mandate = "/templates/letters/direct-debit-mandate.template";
      await page.select("#graph-root", `focus:${mandate}`);
      await page.waitForSelector(`svg g.node[data-path='${mandate}']`);
      expect(path(page)).toContain(`/graph?path=${encodeURIComponent(mandate)}`);
      const around = await page.$$eval("svg g.node", (gs) => gs.map((g) => g.getAttribute("data-path")));
      expect(around.length).toBeLessThan(56);
      expect(around).toContain("/blocks/legal/sepa-terms.block");
      expect(await graphFitsFrame(page)).toBe(true);

      await captureDownloads(page);
      await page.locator("button::-p-text(Export SVG)").click();
      await page.locator("button::-p-text(Export DOT)").click();
      await page.locator("button::-p-text(Export Mermaid)").click();
      await page.waitForFunction("window.__downloads.length === 3");
      const files = await downloads(page);
      expect(files.map((f) => f.name)).toEqual([
        "graph-draft-direct-debit-mandate.template.svg",
        "graph-draft-direct-debit-mandate.template.dot",
        "graph-draft-direct-debit-mandate.template.mmd",
      ]);
      expect(files[0]?.text).toMatch(/^<\?xml version="1.0" encoding="UTF-8"\?>\n<svg /);
      expect(files[0]?.text).toContain("sepa-terms.block");
      expect(files[1]?.text).toMatch(/^digraph /);
      expect(files[2]?.text).toMatch(/^flowchart LR/);
      expect(await page.$("textarea#graph-export")).toBeNull();

      // A node opens its folder: a click in Chromium; in Firefox by the keyboard (Tab reaches the node,
      // Enter opens it), since WebDriver BiDi's pointer lands beside an SVG group's box there.
      if (kind === "chromium") await page.locator(`svg g.node[data-path='${mandate}']`).click();
      else {
        await page.$eval(`svg g.node[data-path='${mandate}']`, (g) => (g as unknown as { focus(): void }).focus());
        await page.keyboard.press("Enter");
      }
      await page.waitForFunction(
        (href) => (globalThis as unknown as { location: { pathname: string } }).location.pathname === href,
        {},
        `/console/browse/${example.store}/draft/templates/letters/`,
      );
    }, 120_000);

    it("a deep link opened in a new tab signs in and lands on its place", async () => {
      const { url, browser } = rig;
      const link = `/console/insights/${example.projectID}/${example.environments.draft}/${draftReport}/graph?show=problems`;
      const tab = await browser.newPage();
      try {
        tab.setDefaultTimeout(20_000);
        // A new tab has its own session (sessionStorage): it signs in, then returns to the link.
        await tab.goto(`${url}${link}`);
        await tab.locator("button::-p-text(Sign in)").click();
        await tab.waitForSelector("form[action='/auth/authorize']");
        await Promise.all([tab.waitForNavigation(), tab.locator("button::-p-text(Sign in as developer)").click()]);
        await tab.waitForSelector(".graph svg g.node.missing");
        expect(path(tab)).toBe(link);
        expect(await tab.$eval("nav.tabs a[aria-current=page]", (a) => a.textContent)).toBe("Graph");
      } finally {
        await tab.close();
      }
    }, 120_000);

    it("a link to what does not exist says so with the API's reason: an unknown project, report, or resource", async () => {
      const { page, url } = rig;
      const nobody = "00000000-0000-4000-8000-000000000000";
      await page.goto(`${url}/console/insights/${nobody}`);
      const project = await page.waitForSelector("section.insights [role=alert]");
      expect(await project?.evaluate((e) => e.textContent)).toMatch(/not found/i);
      expect(await page.$("h1")).toBeNull();
      const base = `${url}/console/insights/${example.projectID}/${example.environments.draft}`;
      await page.goto(`${base}/${nobody}`);
      const report = await page.waitForSelector("section.insights [role=alert]");
      expect(await report?.evaluate((e) => e.textContent)).toMatch(/not found/i);
      await page.goto(`${base}/${draftReport}/related?path=${encodeURIComponent("/blocks/nowhere.block")}`);
      const resource = await page.waitForSelector("section.insights [role=alert]");
      expect(await resource?.evaluate((e) => e.textContent)).toContain("/blocks/nowhere.block");
    }, 60_000);

    it("promotion shows what changes in the target (the comparison) before it runs; nothing chosen is refused", async () => {
      const { page, url } = rig;
      const target = `${url}/resources/v2/data/${example.store}/production/blocks/marketing/loyalty-discount.block`;
      expect((await fetch(target, { method: "HEAD", headers: auth })).status).toBe(404);
      await page.goto(`${url}/console/insights/${example.projectID}`);
      await page.locator('button[aria-label="Promote from draft…"]').click();
      await page.waitForSelector("ul.promote-preview li");
      const items = await page.$$eval("ul.promote-preview li", (lis) => lis.map((li) => li.textContent ?? ""));
      expect(items).toContain("add /blocks/marketing/loyalty-discount.block");
      expect(await page.$eval("dialog[open] p", (p) => p.textContent)).toMatch(
        /^What the promotion changes in production: \d+ added, \d+ replaced/,
      );
      await screenshot(page, `insights-promote-${kind}`);
      // Untick everything: refused in the page (the API would take it as the whole environment).
      await page.$$eval("ul.promote-preview input:checked", (inputs) => {
        for (const i of inputs) (i as unknown as { click(): void }).click();
      });
      await page.locator("dialog[open] button::-p-text(Promote 0 resources)").click();
      await page.waitForSelector("dialog[open] [role=alert]::-p-text(Choose at least one resource)");
      expect((await fetch(target, { method: "HEAD", headers: auth })).status).toBe(404);

      await page.$$eval("ul.promote-preview li", (lis) => {
        for (const li of lis) {
          const input = li.querySelector("input") as unknown as { checked: boolean; click(): void };
          const wanted = (li.textContent ?? "").includes("loyalty-discount.block");
          if (input.checked !== wanted) input.click();
        }
      });
      await page.locator("dialog[open] button::-p-text(Promote 1 resource)").click();
      await page.waitForSelector("[role=status]::-p-text(1 promoted from draft to production by developer.)");
      expect((await fetch(target, { method: "HEAD", headers: auth })).status).toBe(200);
    }, 120_000);
  });
}
