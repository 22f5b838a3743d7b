// The console's insights screen in a real headless Chromium against a real Trove: create a project
// and an environment in the page; with the example project (examples/acme-letters) uploaded
// through the API, create a report, watch it become generated, read its 51 resources in the
// table, and run the queries that find the draft's missing reference and cycle.
// Unit tests of the screen's own logic (the report's rows, the queries' lines) come first.

import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  dependencyGraph,
  edgePath,
  fitScale,
  type GraphLayout,
  LABEL_ROOM,
  layoutGraph,
  NODE_HEIGHT,
  NODE_WIDTH,
  nodeLabel,
  placeGraph,
  VIEW_WIDTH,
} from "../../console/src/screens/insights-layout.js";
import { queryRows, type ReportEntry, reportRows } from "../../console/src/screens/insights-model.js";
import { buildReport, fileSource } from "../../src/insights/index.js";
import { call, uploadExample } from "../insights/api-support.js";
import { type ConsoleRig, describeWithChromium, screenshot, signedInRig } from "./browser.js";

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

describe("dependency graph layout (issue 15: laid out automatically by dagre, missing references and cycles marked)", () => {
  const ref = (absolutePath: string) => ({ name: "x", relativePath: absolutePath, absolutePath });
  const entry = (path: string, blocks: string[]): ReportEntry => ({
    type: path.endsWith(".template") ? "template" : "contentBlock",
    name: "x",
    path,
    tags: {},
    pluggableObjects: [],
    contentBlocks: blocks.map(ref),
    datamodel: null,
    themes: [],
  });
  const entries = [
    entry("/t.template", ["/a.block", "/gone.block"]),
    entry("/a.block", ["/b.block"]),
    entry("/b.block", ["/a.block"]),
    entry("/c.block", []),
  ];
  const overlapping = (g: GraphLayout) =>
    g.nodes.flatMap((a) =>
      g.nodes
        .filter((b) => a.path < b.path && Math.abs(a.x - b.x) < NODE_WIDTH && Math.abs(a.y - b.y) < NODE_HEIGHT)
        .map((b) => `${a.path} / ${b.path}`),
    );
  const inside = (g: GraphLayout) =>
    g.nodes.every((n) => n.x >= 0 && n.y >= 0 && n.x + NODE_WIDTH <= g.width && n.y + NODE_HEIGHT <= g.height);
  /** Each edge starts on its referrer's box and ends on its target's (dagre clips routes to the boxes). */
  const edgesOnBoxes = (g: GraphLayout) => {
    const at = new Map(g.nodes.map((n) => [n.path, n]));
    const onBox = (p: { x: number; y: number } | undefined, path: string) => {
      const n = at.get(path);
      if (!p || !n) return false;
      const e = 0.5;
      const within = p.x >= n.x - e && p.x <= n.x + NODE_WIDTH + e && p.y >= n.y - e && p.y <= n.y + NODE_HEIGHT + e;
      const onEdge =
        Math.abs(p.x - n.x) < e ||
        Math.abs(p.x - n.x - NODE_WIDTH) < e ||
        Math.abs(p.y - n.y) < e ||
        Math.abs(p.y - n.y - NODE_HEIGHT) < e;
      return within && onEdge;
    };
    return g.edges
      .filter((x) => x.from !== x.to)
      .every((x) => onBox(x.points[0], x.from) && onBox(x.points.at(-1), x.to));
  };

  it("marks missing targets and the edges of a cycle, and puts referrers above what they use", () => {
    const g = layoutGraph(entries);
    expect(g.direction).toBe("TB");
    expect(g.nodes.map((n) => n.path)).toEqual(["/a.block", "/b.block", "/c.block", "/gone.block", "/t.template"]);
    expect(g.nodes.filter((n) => n.missing).map((n) => n.path)).toEqual(["/gone.block"]);
    expect(g.nodes.find((n) => n.missing)?.type).toBe("missing");
    expect(
      g.edges
        .filter((e) => e.cycle)
        .map((e) => `${e.from}>${e.to}`)
        .sort(),
    ).toEqual(["/a.block>/b.block", "/b.block>/a.block"]);
    expect(g.edges.filter((e) => !e.cycle)).toHaveLength(2);
    const y = (p: string) => g.nodes.find((n) => n.path === p)?.y ?? -1;
    expect(y("/a.block")).toBeGreaterThan(y("/t.template"));
    expect(y("/gone.block")).toBeGreaterThan(y("/t.template"));
    expect(overlapping(g)).toEqual([]);
    expect(inside(g)).toBe(true);
    expect(edgesOnBoxes(g)).toBe(true);
  });

  it("a resource referring to itself is a cycle of one", () => {
    const g = dependencyGraph([entry("/self.block", ["/self.block"]), entry("/t.template", ["/self.block"])]);
    expect(g.edges).toEqual([
      { from: "/self.block", to: "/self.block", cycle: true },
      { from: "/t.template", to: "/self.block", cycle: false },
    ]);
    const placed = placeGraph(g, "TB");
    expect(placed.edges.every((e) => e.points.length >= 2)).toBe(true);
  });

  it("the neighbourhood of a resource is it and what it uses, directly or not", () => {
    expect(layoutGraph(entries, "/a.block").nodes.map((n) => n.path)).toEqual(["/a.block", "/b.block"]);
    expect(layoutGraph(entries, "/c.block").edges).toEqual([]);
  });

  it("left to right on request: referrers left of what they use", () => {
    const g = layoutGraph(entries, undefined, "LR");
    expect(g.direction).toBe("LR");
    const x = (p: string) => g.nodes.find((n) => n.path === p)?.x ?? -1;
    expect(x("/a.block")).toBeGreaterThan(x("/t.template"));
    expect(x("/gone.block")).toBeGreaterThan(x("/t.template"));
    expect(overlapping(g)).toEqual([]);
    expect(edgesOnBoxes(g)).toBe(true);
  });

  it("the example's draft (56 resources, 180 references) reads left to right and fits a 1024 px window (issue 15: the whole-environment graph was too wide)", async () => {
    const document = await buildReport(
      fileSource(fileURLToPath(new URL("../../examples/acme-letters/draft", import.meta.url))),
      {
        creator: "test",
        projectID: "p",
        projectName: "acme-letters",
        environmentID: "e",
        environmentName: "draft",
      },
    );
    const draft = JSON.parse(JSON.stringify(document)).resources as ReportEntry[];
    const tb = placeGraph(dependencyGraph(draft), "TB");
    const g = layoutGraph(draft);
    expect(g.nodes).toHaveLength(56);
    expect(g.direction).toBe("LR");
    // Top to bottom it is several thousand pixels wide; left to right it fits the frame at nearly 100 %.
    expect(tb.width).toBeGreaterThan(3 * VIEW_WIDTH);
    expect(fitScale(g, VIEW_WIDTH)).toBeGreaterThan(0.9);
    expect(overlapping(g)).toEqual([]);
    expect(inside(g)).toBe(true);
    expect(edgesOnBoxes(g)).toBe(true);
    const x = new Map(g.nodes.map((n) => [n.path, n.x]));
    const backwards = g.edges.filter((e) => !e.cycle && (x.get(e.to) ?? 0) <= (x.get(e.from) ?? 0));
    expect(backwards).toEqual([]);
    expect(g.nodes.filter((n) => n.missing).map((n) => n.path)).toEqual(["/blocks/legal/sepa-terms.block"]);
    expect(g.edges.filter((e) => e.cycle).map((e) => `${e.from} > ${e.to}`)).toEqual([
      "/blocks/marketing/cross-sell-offer.block > /blocks/marketing/loyalty-discount.block",
      "/blocks/marketing/loyalty-discount.block > /blocks/marketing/cross-sell-offer.block",
    ]);
  });

  it("fitScale never enlarges; an edge's route is a path through its points; a long name is squeezed, never cut", () => {
    expect(fitScale({ width: 500 }, 960)).toBe(1);
    expect(fitScale({ width: 1920 }, 960)).toBe(0.5);
    expect(edgePath([])).toBe("");
    expect(
      edgePath([
        { x: 0, y: 0 },
        { x: 10, y: 0 },
      ]),
    ).toBe("M0,0 L10,0");
    expect(
      edgePath([
        { x: 0, y: 0 },
        { x: 10, y: 0 },
        { x: 10, y: 10 },
        { x: 20, y: 10 },
      ]),
    ).toBe("M0,0 Q10,0 10,5 Q10,10 15,10 L20,10");
    // The whole name, squeezed when it would not fit (at most to 70 %; the box clips the rest).
    expect(nodeLabel("/templates/letters/welcome-letter.template")).toEqual({ text: "welcome-letter.template" });
    expect(nodeLabel("/templates/address-change-confirmation.template")).toEqual({
      text: "address-change-confirmation.template",
      squeeze: LABEL_ROOM,
    });
    const long = nodeLabel(`/blocks/${"x".repeat(60)}.block`);
    expect(long.text).toHaveLength(66);
    expect(long.squeeze).toBeGreaterThan(LABEL_ROOM);
  });
});

describeWithChromium("console insights (Chromium)", (chromium) => {
  let rig: ConsoleRig;
  let auth: Record<string, string>;
  beforeAll(async () => {
    ({ rig, auth } = await signedInRig(chromium));
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
    const welcome = rows.find((r) => r[0]?.trim() === "/templates/letters/welcome-letter.template");
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

    // The dependency graph (its own chunk): 55 resources and the missing target, the cycle in red.
    await page.locator("button::-p-text(Show dependency graph)").click();
    await page.waitForSelector("svg[aria-label='Dependency graph: 56 resources']");
    expect(await page.$$eval("svg g.node.missing", (gs) => gs.map((g) => g.getAttribute("data-path")))).toEqual([
      "/blocks/legal/sepa-terms.block",
    ]);
    const cycleEdges = await page.$$eval("svg path.edge.cycle", (ps) =>
      ps.map((p) => `${p.getAttribute("data-from")} > ${p.getAttribute("data-to")}`).sort(),
    );
    expect(cycleEdges).toEqual([
      "/blocks/marketing/cross-sell-offer.block > /blocks/marketing/loyalty-discount.block",
      "/blocks/marketing/loyalty-discount.block > /blocks/marketing/cross-sell-offer.block",
    ]);
    // Laid out left to right (the example is wide, not deep) and fitted to the frame's width.
    expect(await page.$eval(".graph svg", (s) => s.getAttribute("data-direction"))).toBe("LR");
    const width = async () => Number(await page.$eval(".graph svg", (s) => s.getAttribute("width")));
    const frame = await page.$eval(".graph-canvas", (el) => el.clientWidth);
    const fitted = await width();
    expect(fitted).toBeLessThanOrEqual(frame);
    expect(fitted).toBeGreaterThan(frame * 0.6);
    await page.locator("button::-p-text(Zoom in)").click();
    expect(await width()).toBeGreaterThan(fitted);
    await page.locator("button::-p-text(Zoom out)").click();
    await page.locator("button::-p-text(Zoom out)").click();
    expect(await width()).toBeLessThan(fitted);
    await page.locator("button::-p-text(Fit to width)").click();
    expect(await width()).toBe(fitted);

    // A drag pans the frame (it scrolls) and, though it starts on a node, opens nothing.
    const here = new URL(page.url()).pathname;
    await page.$eval(".graph-canvas", (el) => el.scrollIntoView());
    const box = await (await page.$(".graph-canvas"))?.boundingBox();
    if (!box) throw new Error("no graph frame");
    // The lowest resource in view, its centre: where the drag starts.
    const start = await page.$$eval(
      "svg g.node:not(.missing)",
      (gs, bottom) =>
        gs
          .map((g) => g.getBoundingClientRect())
          .filter((r) => r.bottom < bottom)
          .map((r) => ({ x: r.left + r.width / 2, y: r.top + r.height / 2 }))
          .sort((a, b) => b.y - a.y)[0],
      box.y + box.height - 5,
    );
    if (!start || start.y < box.y + 200) throw new Error("no resource low enough in the frame to drag from");
    await page.mouse.move(start.x, start.y);
    await page.mouse.down();
    await page.mouse.move(start.x, box.y + 20, { steps: 8 });
    await page.mouse.up();
    expect(await page.$eval(".graph-canvas", (el) => el.scrollTop)).toBeGreaterThan(0);
    expect(new URL(page.url()).pathname).toBe(here);
    await page.$eval(".graph-canvas", (el) => {
      el.scrollTop = 0;
    });

    await page.locator("button::-p-text(Export DOT)").click();
    await page.waitForSelector("label[for=graph-export]::-p-text(DOT)");
    expect(await page.$eval("#graph-export", (t) => (t as unknown as { value: string }).value)).toMatch(/^digraph /);
    await page.locator("button::-p-text(Export Mermaid)").click();
    await page.waitForSelector("label[for=graph-export]::-p-text(Mermaid)");
    expect(await page.$eval("#graph-export", (t) => (t as unknown as { value: string }).value)).toMatch(
      /^flowchart LR/,
    );
    await page.locator("button::-p-text(Export SVG)").click();
    await page.waitForSelector("label[for=graph-export]::-p-text(SVG)");
    const svg = await page.$eval("#graph-export", (t) => (t as unknown as { value: string }).value);
    expect(svg).toMatch(/^<svg /);
    expect(svg).toContain("sepa-terms.block");

    // The whole environment, for the picture: a taller window, one step below the fitted zoom.
    await page.setViewport({ width: 1280, height: 1800 });
    await page.locator("button::-p-text(Zoom out)").click();
    await page.$eval(".graph", (el) => el.scrollIntoView());
    await screenshot(page, "insights-graph");
    await page.setViewport({ width: 1280, height: 900 });

    // The neighbourhood of the mandate template: it, what it uses, and its missing block.
    await page.select("#graph-root", "/templates/letters/direct-debit-mandate.template");
    await page.waitForSelector("svg g.node[data-path='/templates/letters/direct-debit-mandate.template']");
    const around = await page.$$eval("svg g.node", (gs) => gs.map((g) => g.getAttribute("data-path")));
    expect(around.length).toBeLessThan(56);
    expect(around).toContain("/blocks/legal/sepa-terms.block");

    // A click on a node opens its folder.
    await page.locator("svg g.node[data-path='/templates/letters/direct-debit-mandate.template']").click();
    await page.waitForFunction(
      (href) => (globalThis as unknown as { location: { pathname: string } }).location.pathname === href,
      {},
      `/console/browse/${example.store}/draft/templates/letters/`,
    );
  }, 180_000);

  it("promotes resources selected in the draft's report to production, shows each outcome, and production's next report says who promoted them", async () => {
    const { page } = rig;
    await page.goto(`${rig.url}/console/insights`);
    await page.locator('button[aria-label="Open project acme-letters"]').click();
    await page.locator('button[aria-label="Open environment draft"]').click();
    await page.locator("button::-p-text(Create report)").click();
    await page.waitForSelector("table.report caption::-p-text(55 resources)");

    // Nothing selected: refused in the page (the API would promote the whole environment).
    await page.locator("form[aria-label=Promote] button::-p-text(Promote)").click();
    await page.waitForSelector("form[aria-label=Promote] [role=alert]::-p-text(Select the resources)");
    const target = `${rig.url}/resources/v2/data/acme-letters/production/blocks/marketing/loyalty-discount.block`;
    expect((await fetch(target, { method: "HEAD", headers: auth })).status).toBe(404);

    await page.locator('input[aria-label="Select /blocks/marketing/loyalty-discount.block"]').click();
    await page.locator("#promote-to").fill("production");
    await page.locator("form[aria-label=Promote] button::-p-text(Promote)").click();
    await page.waitForSelector("table.promoted caption::-p-text(1 promoted, 0 failed)");
    expect(await page.$eval("table.promoted tbody tr", (tr) => tr.textContent)).toContain(
      "/blocks/marketing/loyalty-discount.block",
    );
    await page.waitForSelector("[role=status]::-p-text(1 promoted to production.)");
    const copied = await fetch(target, { headers: auth });
    expect(copied.status).toBe(200);
    expect(await copied.text()).toContain("loyalty");

    await page.locator('button[aria-label="Open environment production"]').click();
    await page.locator("button::-p-text(Create report)").click();
    await page.waitForSelector("table.report caption::-p-text(52 resources)");
    const promoted = await page.$$eval("table.report tbody tr", (trs) =>
      trs.map((tr) => [...tr.children].map((c) => c.textContent ?? "")),
    );
    const row = promoted.find((r) => r[0]?.includes("/blocks/marketing/loyalty-discount.block"));
    expect(row?.[4]).toMatch(/^\d{4}-\d{2}-\d{2}T.* by developer$/);
    expect(promoted.filter((r) => r[4] === "never")).toHaveLength(51);
  }, 180_000);
});
