// The console's insights screen in a real headless Chromium against a real Trove: create a project
// and an environment in the page; with the example project (examples/acme-letters) uploaded
// through the API, create a report, watch it become generated, read its 51 resources in the
// table, and run the queries that find the draft's missing reference and cycle.
// Unit tests of the screen's own logic (the report's rows, the queries' lines) come first.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryRows, type ReportEntry, reportRows } from "../../console/src/screens/insights-model.js";
import { call, uploadExample } from "../insights/api-support.js";
import { type ConsoleRig, describeWithChromium, screenshot, signIn, startConsoleRig } from "./browser.js";

describe("insights screen logic", () => {
  const entry = (over: Partial<ReportEntry>): ReportEntry => ({
    type: "template",
    name: "welcome",
    path: "/templates/welcome.template",
    tags: {},
    pluggableObjects: [],
    contentBlocks: [],
    datamodel: null,
    themes: [],
    ...over,
  });

  it("a row lists the data model, themes, blocks and plugins once each, missing ones marked, tags as key=value", () => {
    const ref = (absolutePath: string, missing?: boolean) => ({
      name: "x",
      relativePath: `..${absolutePath}`,
      absolutePath,
      ...(missing ? { missing } : {}),
    });
    const [row] = reportRows([
      entry({
        tags: { owner: "legal", lang: "en" },
        datamodel: ref("/datamodels/customer.datamodel"),
        themes: [ref("/themes/print.theme")],
        contentBlocks: [ref("/blocks/a.block"), ref("/blocks/gone.block", true), ref("/blocks/a.block")],
        pluggableObjects: [ref("/plugins/logo.plugin")],
        lastPromotedDate: "2026-03-01T12:00:00.000Z",
        lastPromotedBy: "alice",
      }),
    ]);
    expect(row).toEqual({
      path: "/templates/welcome.template",
      type: "template",
      tags: "owner=legal, lang=en",
      references: [
        { path: "/datamodels/customer.datamodel", missing: false },
        { path: "/themes/print.theme", missing: false },
        { path: "/blocks/a.block", missing: false },
        { path: "/blocks/gone.block", missing: true },
        { path: "/plugins/logo.plugin", missing: false },
      ],
      lastPromoted: "2026-03-01T12:00:00.000Z by alice",
    });
  });

  it("a resource never promoted says never; the queries' answers read as lines", () => {
    expect(reportRows([entry({ lastPromotedDate: null, lastPromotedBy: null })])[0]?.lastPromoted).toBe("never");
    expect(queryRows.cycles([{ cycle: ["/a.block", "/b.block", "/a.block"] }])).toEqual([
      "/a.block → /b.block → /a.block",
    ]);
    expect(queryRows.missing([{ path: "/t.template", kind: "contentBlock", absolutePath: "/blocks/x.block" }])).toEqual(
      ["/t.template → /blocks/x.block (contentBlock, missing)"],
    );
    expect(queryRows.related([{ path: "/b.block", type: "contentBlock", depth: 2, missing: false }])).toEqual([
      "/b.block (contentBlock, depth 2)",
    ]);
  });
});

describeWithChromium("console insights (Chromium)", (chromium) => {
  let rig: ConsoleRig;
  let auth: Record<string, string>;
  beforeAll(async () => {
    rig = await startConsoleRig(chromium);
    auth = { Authorization: `Bearer ${await rig.token()}` };
    await signIn(rig.page, rig.url);
  }, 120_000);
  afterAll(async () => {
    await rig?.close();
  });

  it("creates a project and an environment in the page; the API lists them", async () => {
    const { page } = rig;
    await page.locator("nav a::-p-text(Insights)").click();
    await page.waitForSelector("h1::-p-text(Insights)");
    await page.locator("#project-name").fill("brochures");
    await page.locator("#project-account").fill("acme");
    await page.locator("button::-p-text(Create project)").click();
    await page.waitForSelector("[role=status]::-p-text(Project brochures created.)");
    await page.locator("#environment-name").fill("staging");
    await page.locator("button::-p-text(Create environment)").click();
    await page.waitForSelector("[role=status]::-p-text(Environment staging created.)");
    await page.waitForSelector('button[aria-label="Open environment staging"]');

    const projects = await call(rig.url, "GET", "/insights/v1/projects", undefined, auth);
    expect(projects.status).toBe(200);
    const made = (projects.json.projects ?? projects.json).find((p: { name: string }) => p.name === "brochures");
    expect(made?.account).toBe("acme");
    const envs = await call(rig.url, "GET", `/insights/v1/projects/${made.id}/environments`, undefined, auth);
    expect(envs.status).toBe(200);
    expect(JSON.stringify(envs.json)).toContain('"staging"');
  });

  it("a project name the API refuses is said, and nothing is created", async () => {
    const { page } = rig;
    const before = await call(rig.url, "GET", "/insights/v1/projects", undefined, auth);
    await page.locator("#project-name").fill("");
    await page.locator("#project-account").fill("");
    await page.locator("button::-p-text(Create project)").click();
    await page.waitForSelector("form[aria-label='New project'] [role=alert]");
    const after = await call(rig.url, "GET", "/insights/v1/projects", undefined, auth);
    expect(after.json).toEqual(before.json);
  });

  it("reports the example: generating to generated, 51 resources in production; the draft's missing reference and cycle", async () => {
    const { page } = rig;
    const example = await uploadExample(rig.url, "acme-letters", auth);
    expect(example.files).toBeGreaterThan(0);
    await page.goto(`${rig.url}/console/insights`);
    await page.locator('button[aria-label="Open project acme-letters"]').click();
    await page.locator('button[aria-label="Open environment production"]').click();
    await page.locator("button::-p-text(Create report)").click();
    await page.waitForSelector(".report-state strong::-p-text(generated)", { timeout: 60_000 });
    await page.waitForSelector("table.report caption::-p-text(51 resources)");
    const rows = await page.$$eval("table.report tbody tr", (trs) =>
      trs.map((tr) => [...tr.children].map((c) => c.textContent ?? "")),
    );
    expect(rows).toHaveLength(51);
    const welcome = rows.find((r) => r[0] === "/templates/letters/welcome-letter.template");
    expect(welcome?.[1]).toBe("template");
    expect(welcome?.[3]).toContain("/blocks/common/letterhead.block");
    expect(welcome?.[4]).toBe("never");

    await page.locator('button[aria-label="Open environment draft"]').click();
    await page.locator("button::-p-text(Create report)").click();
    await page.waitForSelector(".report-state strong::-p-text(generated)", { timeout: 60_000 });
    await page.waitForSelector("table.report caption::-p-text(55 resources)");
    expect(await page.$$eval("table.report .error", (els) => els.map((e) => e.textContent))).toEqual([
      "/blocks/legal/sepa-terms.block (missing)",
    ]);

    await page.locator("button::-p-text(Missing references)").click();
    await page.waitForSelector(".query-result h3::-p-text(Missing references: 1)");
    const missing = await page.$$eval(".query-result li", (lis) => lis.map((li) => li.textContent));
    expect(missing).toHaveLength(1);
    expect(missing[0]).toContain("/blocks/legal/sepa-terms.block");

    await page.locator("button::-p-text(Cycles)").click();
    await page.waitForSelector(".query-result h3::-p-text(Cycles: 1)");
    const cycle = await page.$eval(".query-result li", (li) => li.textContent ?? "");
    expect(cycle).toContain("cross-sell-offer.block");
    expect(cycle).toContain("loyalty-discount.block");

    await page.locator("#query-path").fill("/blocks/marketing/cross-sell-offer.block");
    await page.locator("button::-p-text(Dependents)").click();
    await page.waitForSelector(".query-result h3::-p-text(Dependents of)");
    expect(await page.$$eval(".query-result li", (lis) => lis.map((li) => li.textContent).join("\n"))).toContain(
      "loyalty-discount.block",
    );
    await page.locator("#query-path").fill("/blocks/nowhere.block");
    await page.locator("button::-p-text(Dependencies)").click();
    const alert = await page.waitForSelector(".queries [role=alert]");
    expect(await alert?.evaluate((e) => e.textContent)).toContain("/blocks/nowhere.block");
    expect(await page.$(".query-result")).toBeNull();

    await page.locator("button::-p-text(Cycles)").click();
    await page.waitForSelector(".query-result h3::-p-text(Cycles: 1)");
    await screenshot(page, "insights");
  }, 180_000);
});
