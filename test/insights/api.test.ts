// The content-insights API end to end over REST, on a real server: projects and environments,
// creating a report, its status record, the report document (golden, field by field), queries,
// promotion with lastPromotedDate/By, availability, and bad input that creates nothing.

import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReportDocument } from "../../src/insights/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { call, type ExampleProject, generatedReport, ISO_MS_UTC, UUID, uploadExample } from "./api-support.js";

const GOLDEN = fileURLToPath(new URL("./golden/acme-production.json", import.meta.url));
const REPORTS = "/insights/v1/reports";

let t: TestServer;
let example: ExampleProject;

beforeAll(async () => {
  t = await startServer({ reportWorker: { pollInterval: 50 } });
  example = await uploadExample(t.url);
});
afterAll(() => t?.stop());

/** Reports stored for the example project, in any environment: what "no report created" is checked against. */
async function storedReports(): Promise<number> {
  let n = 0;
  for (const env of Object.values(example.environments)) {
    n += (await t.storage.insights.listReports(example.projectID, env)).length;
  }
  return n;
}

describe("projects and environments", () => {
  it("POST /insights/v1/projects answers 201 with the project and a Location", async () => {
    const res = await call(t.url, "POST", "/insights/v1/projects", { name: "brochures", account: "acme" });
    expect(res.status).toBe(201);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.json).toEqual({
      id: expect.stringMatching(UUID),
      name: "brochures",
      account: "acme",
      store: "brochures",
      created: expect.stringMatching(ISO_MS_UTC),
      creator: "anonymous",
    });
    expect(res.headers.get("location")).toBe(`/insights/v1/projects/${res.json.id}`);
    // Its store exists, named after it.
    expect((await fetch(`${t.url}/resources/v2/stores/brochures`)).status).toBe(200);
    const got = await call(t.url, "GET", `/insights/v1/projects/${res.json.id}`);
    expect(got.json).toEqual(res.json);
  });

  it("a second project of the same name in the account answers 409 and creates nothing", async () => {
    const before = await call(t.url, "GET", "/insights/v1/projects");
    const res = await call(t.url, "POST", "/insights/v1/projects", { name: "acme-letters", account: "acme" });
    expect(res.status).toBe(409);
    expect(res.text).toMatch(/already/);
    expect((await call(t.url, "GET", "/insights/v1/projects")).json).toEqual(before.json);
  });

  it.each([
    [{ account: "acme" }, /name is required/],
    [{ name: "a/b", account: "acme" }, /invalid project name "a\/b"/],
    [{ name: "ok", account: "acme", colour: "red" }, /unknown field "colour"/],
    [{ name: "ok" }, /account is required/],
    [{ name: 42, account: "acme" }, /name must be a string/],
  ])("bad project %j answers 400 with the reason", async (body, reason) => {
    const res = await call(t.url, "POST", "/insights/v1/projects", body);
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(res.text).toMatch(reason);
  });

  it("a body that is not JSON answers 400", async () => {
    const res = await call(t.url, "POST", "/insights/v1/projects", "{name:", { "Content-Type": "application/json" });
    expect(res.status).toBe(400);
    expect(res.text).toMatch(/not valid JSON/);
  });

  it("environments: list in name order, get one, each is a top-level directory of the store", async () => {
    const list = await call(t.url, "GET", `/insights/v1/projects/${example.projectID}/environments`);
    expect(list.status).toBe(200);
    expect(list.json.environments.map((e: { name: string }) => e.name)).toEqual(["draft", "production"]);
    const one = await call(
      t.url,
      "GET",
      `/insights/v1/projects/${example.projectID}/environments/${example.environments.draft}`,
    );
    expect(one.json).toMatchObject({ id: example.environments.draft, projectID: example.projectID, name: "draft" });
    const dir = await fetch(`${t.url}/resources/v2/data/${example.store}/draft/`);
    expect(dir.status).toBe(200);
  });

  it("an environment of another project answers 404; a duplicate environment 409", async () => {
    const other = await call(t.url, "POST", "/insights/v1/projects", { name: "other", account: "acme" });
    const res = await call(
      t.url,
      "GET",
      `/insights/v1/projects/${other.json.id}/environments/${example.environments.draft}`,
    );
    expect(res.status).toBe(404);
    const dup = await call(t.url, "POST", `/insights/v1/projects/${example.projectID}/environments`, {
      name: "draft",
    });
    expect(dup.status).toBe(409);
  });

  it("a malformed project ID answers 400; an unknown one 404", async () => {
    expect((await call(t.url, "GET", "/insights/v1/projects/not-a-uuid")).status).toBe(400);
    const unknown = await call(t.url, "GET", "/insights/v1/projects/00000000-0000-4000-8000-000000000000");
    expect(unknown.status).toBe(404);
    expect(unknown.text).toMatch(/project 00000000-0000-4000-8000-000000000000 not found/);
  });
});

describe("Create a report (report request → report reference)", () => {
  it("POST /insights/v1/reports answers 202 {reportID: [uuid]} with a Location to its status", async () => {
    const res = await call(t.url, "POST", REPORTS, {
      projectID: example.projectID,
      environmentID: example.environments.production,
    });
    expect(res.status).toBe(202);
    expect(res.json).toEqual({ reportID: [expect.stringMatching(UUID)] });
    const id = res.json.reportID[0];
    expect(res.headers.get("location")).toBe(
      `${REPORTS}/${id}?projectID=${example.projectID}&environmentID=${example.environments.production}`,
    );
  });

  const bad: Array<[string, unknown, number, RegExp]> = [
    ["projectID missing", { environmentID: "7d9e1f20-3b4c-4d5e-8f60-718293a4b5c6" }, 400, /projectID is required/],
    ["environmentID not a UUID", { projectID: "P", environmentID: "production" }, 400, /environmentID must be a UUID/],
    [
      "unknown additional field",
      { projectID: "P", environmentID: "E", additionalFields: ["lastModifiedBy"] },
      400,
      /"lastModifiedBy" is not allowed/,
    ],
    [
      "additionalFields not an array",
      { projectID: "P", environmentID: "E", additionalFields: "lastPromotedBy" },
      400,
      /additionalFields must be an array/,
    ],
    ["misspelt field", { projectId: "P", environmentID: "E" }, 400, /unknown field "projectId"/],
    [
      "unknown project",
      { projectID: "00000000-0000-4000-8000-000000000000", environmentID: "E" },
      404,
      /project .* not found/,
    ],
    [
      "unknown environment",
      { projectID: "P", environmentID: "00000000-0000-4000-8000-000000000000" },
      404,
      /environment .* not found/,
    ],
  ];
  it.each(bad)("%s: answers %#, the reason, and creates no report", async (_name, body, status, reason) => {
    const fill = (v: unknown) => (v === "P" ? example.projectID : v === "E" ? example.environments.draft : v);
    const input = Object.fromEntries(Object.entries(body as object).map(([k, v]) => [k, fill(v)]));
    const before = await storedReports();
    const res = await call(t.url, "POST", REPORTS, input);
    expect(res.status).toBe(status);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(res.text).toMatch(reason);
    expect(await storedReports()).toBe(before);
  });

  it("an environment of another project answers 404", async () => {
    const other = await call(t.url, "POST", "/insights/v1/projects", { name: "third", account: "acme" });
    const res = await call(t.url, "POST", REPORTS, {
      projectID: other.json.id,
      environmentID: example.environments.draft,
    });
    expect(res.status).toBe(404);
    expect(res.text).toMatch(/environment .* not found in project third/);
  });

  it("a body over 64 KiB answers 413", async () => {
    const res = await call(t.url, "POST", REPORTS, { projectID: "x".repeat(70 * 1024) });
    expect(res.status).toBe(413);
  });
});

describe("Get a report by ID (status record) and the report document", () => {
  let id: string;
  let query: string;
  let status: { status: number; json: Record<string, unknown> };

  beforeAll(async () => {
    ({ id, query, status } = await generatedReport(t.url, example.projectID, example.environments.production));
  });

  it("the status record has id [uuid], creator, created [ISO ms UTC], status generated and href", () => {
    expect(status.status).toBe(200);
    expect(status.json).toEqual({
      id: [id],
      creator: "anonymous",
      created: [expect.stringMatching(ISO_MS_UTC)],
      status: "generated",
      href: `${REPORTS}/${id}/document?${query}`,
    });
    expect(Object.keys(status.json)).toEqual(["id", "creator", "created", "status", "href"]);
  });

  it("href serves the report document, equal field by field to the golden document", async () => {
    const doc = await call(t.url, "GET", status.json.href as string);
    expect(doc.status).toBe(200);
    expect(doc.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(doc.headers.get("etag")).toBe(`"${id}"`);
    expect(doc.headers.get("cache-control")).toMatch(/^private, max-age=\d+$/);
    const actual = doc.json as ReportDocument;
    const expected = JSON.parse(await readFile(GOLDEN, "utf8")) as ReportDocument;
    expect(actual.created).toBe((status.json.created as string[])[0]);
    expect(actual).toMatchObject({
      version: "1.0",
      creator: "anonymous",
      projectID: example.projectID,
      projectName: "acme-letters",
      environmentID: example.environments.production,
      environmentName: "production",
    });
    expect(actual.resources.length).toBe(expected.resources.length);
    actual.resources.forEach((entry, i) => {
      expect(entry.created).toMatch(ISO_MS_UTC);
      expect(entry.lastModified).toMatch(ISO_MS_UTC);
      expect({ ...entry, created: "<timestamp>", lastModified: "<timestamp>" }).toEqual(expected.resources[i]);
    });
  });

  it("If-None-Match with the document's ETag answers 304", async () => {
    const res = await fetch(`${t.url}${status.json.href}`, { headers: { "If-None-Match": `"${id}"` } });
    expect(res.status).toBe(304);
  });

  it("a report asked for under another environment of the project answers 404", async () => {
    const res = await call(
      t.url,
      "GET",
      `${REPORTS}/${id}?projectID=${example.projectID}&environmentID=${example.environments.draft}`,
    );
    expect(res.status).toBe(404);
  });

  it.each([
    ["no projectID", `environmentID=E`, /projectID is required/],
    ["a repeated projectID", `projectID=P&projectID=P&environmentID=E`, /projectID must be given once/],
    ["an unknown parameter", `projectID=P&environmentID=E&colour=red`, /unknown field "colour"/],
    ["a bad wait", `projectID=P&environmentID=E&wait=soon`, /wait must be a number of seconds/],
  ])("a status request with %s answers 400", async (_name, q, reason) => {
    const filled = q.replaceAll("P", example.projectID).replaceAll("E", example.environments.production);
    const res = await call(t.url, "GET", `${REPORTS}/${id}?${filled}`);
    expect(res.status).toBe(400);
    expect(res.text).toMatch(reason);
  });

  it("a malformed reportID answers 400, an unknown one 404", async () => {
    expect((await call(t.url, "GET", `${REPORTS}/nope?${query}`)).status).toBe(400);
    const res = await call(t.url, "GET", `${REPORTS}/00000000-0000-4000-8000-000000000000?${query}`);
    expect(res.status).toBe(404);
  });
});

describe("queries over a generated report (draft: a missing reference and a cycle)", () => {
  let base: string;
  let query: string;

  beforeAll(async () => {
    const r = await generatedReport(t.url, example.projectID, example.environments.draft);
    base = `${REPORTS}/${r.id}`;
    query = r.query;
  });

  it("dependencies of a template: direct and transitive, nearest first", async () => {
    const res = await call(
      t.url,
      "GET",
      `${base}/dependencies?${query}&path=/templates/letters/payment-reminder.template`,
    );
    expect(res.status).toBe(200);
    expect(res.json.resource).toBe("/templates/letters/payment-reminder.template");
    expect(res.json.direct.length).toBeGreaterThan(0);
    for (const d of res.json.direct) expect(d.depth).toBe(1);
    expect(res.json.all.length).toBeGreaterThanOrEqual(res.json.direct.length);
    const depths = res.json.all.map((d: { depth: number }) => d.depth);
    expect(depths).toEqual([...depths].sort((a, b) => a - b));
  });

  it("dependents of a data model name the templates that use it", async () => {
    const deps = await call(
      t.url,
      "GET",
      `${base}/dependencies?${query}&path=/templates/letters/payment-reminder.template`,
    );
    const model = deps.json.direct.find((d: { type: string }) => d.type === "datamodel");
    const res = await call(t.url, "GET", `${base}/dependents?${query}&path=${encodeURIComponent(model.path)}`);
    expect(res.status).toBe(200);
    expect(res.json.direct.map((d: { path: string }) => d.path)).toContain(
      "/templates/letters/payment-reminder.template",
    );
  });

  it("missing references, cycles and unused resources answer their lists", async () => {
    const missing = await call(t.url, "GET", `${base}/missing-references?${query}`);
    expect(missing.status).toBe(200);
    expect(missing.json.references.length).toBeGreaterThan(0);
    for (const m of missing.json.references) {
      expect(Object.keys(m)).toEqual(["path", "kind", "name", "relativePath", "absolutePath"]);
    }
    const cycles = await call(t.url, "GET", `${base}/cycles?${query}`);
    expect(cycles.json.cycles.length).toBeGreaterThan(0);
    const cycle = cycles.json.cycles[0];
    expect(cycle.cycle[0]).toBe(cycle.cycle.at(-1));
    const unused = await call(t.url, "GET", `${base}/unused?${query}`);
    expect(unused.status).toBe(200);
    expect(Array.isArray(unused.json.resources)).toBe(true);
  });

  it("graph export as DOT and Mermaid", async () => {
    const dot = await fetch(`${t.url}${base}/graph?${query}&format=dot`);
    expect(dot.status).toBe(200);
    expect(dot.headers.get("content-type")).toBe("text/vnd.graphviz; charset=utf-8");
    expect(await dot.text()).toMatch(/^digraph /);
    const mermaid = await fetch(`${t.url}${base}/graph?${query}&format=mermaid`);
    expect(await mermaid.text()).toMatch(/^flowchart /);
    const bad = await call(t.url, "GET", `${base}/graph?${query}&format=png`);
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/format must be dot or mermaid/);
  });

  it("a path that is not in the report answers 404; no path 400", async () => {
    const res = await call(t.url, "GET", `${base}/dependencies?${query}&path=/nothing/here.block`);
    expect(res.status).toBe(404);
    expect((await call(t.url, "GET", `${base}/dependencies?${query}`)).status).toBe(400);
  });
});

describe("promotion and the additional fields", () => {
  const path = "/templates/letters/payment-reminder.template";

  it("promoting a resource copies it through the write path and records lastPromotedDate/By", async () => {
    const source = await fetch(`${t.url}/resources/v2/data/${example.store}/draft${path}`);
    const bytes = Buffer.from(await source.arrayBuffer());
    const poll = await fetch(`${t.url}/resources/v2/poll?store=${example.store}:0`);
    const before = (await poll.text()).trim().split("\n").length;
    const res = await call(t.url, "POST", `/insights/v1/projects/${example.projectID}/promotions`, {
      fromEnvironmentID: example.environments.draft,
      toEnvironmentID: example.environments.production,
      resources: [path],
    });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      promotedDate: expect.stringMatching(ISO_MS_UTC),
      promotedBy: "anonymous",
      promoted: 1,
      failed: 0,
      resources: [{ path, tag: expect.any(String) }],
    });
    const copy = await fetch(`${t.url}/resources/v2/data/${example.store}/production${path}`);
    expect(Buffer.from(await copy.arrayBuffer())).toEqual(bytes);
    expect(copy.headers.get("etag")).toBe(`"${res.json.resources[0].tag}"`);
    // A change event for the copy.
    const after = await (await fetch(`${t.url}/resources/v2/poll?store=${example.store}:0`)).text();
    expect(after).toContain(`idr://${example.store}/production/templates/letters/payment-reminder.template`);
    expect(after.trim().split("\n").length).toBeGreaterThanOrEqual(before);

    const report = await generatedReport(t.url, example.projectID, example.environments.production, [
      "lastPromotedBy",
      "lastPromotedDate",
    ]);
    const doc = await call(t.url, "GET", report.status.json.href);
    const promoted = doc.json.resources.find((r: { path: string }) => r.path === path);
    expect(promoted.lastPromotedDate).toBe(res.json.promotedDate);
    expect(promoted.lastPromotedBy).toBe("anonymous");
    const keys = Object.keys(promoted);
    expect(keys.slice(keys.indexOf("themes") + 1)).toEqual(["lastPromotedDate", "lastPromotedBy"]);
    const never = doc.json.resources.find((r: { path: string }) => r.path !== path);
    expect(never.lastPromotedDate).toBeNull();
    expect(never.lastPromotedBy).toBeNull();
  });

  it("a stale ifMatch answers 412 and leaves the target unchanged", async () => {
    const target = `${t.url}/resources/v2/data/${example.store}/production${path}`;
    const before = await fetch(target);
    const bytes = Buffer.from(await before.arrayBuffer());
    const res = await call(t.url, "POST", `/insights/v1/projects/${example.projectID}/promotions`, {
      fromEnvironmentID: example.environments.draft,
      toEnvironmentID: example.environments.production,
      resources: [{ path, ifMatch: "stale-tag" }],
    });
    expect(res.status).toBe(412);
    expect(res.text).toMatch(/nothing promoted: .*If-Match/);
    const after = await fetch(target);
    expect(after.headers.get("etag")).toBe(before.headers.get("etag"));
    expect(Buffer.from(await after.arrayBuffer())).toEqual(bytes);
  });

  it("promoting a whole environment copies every file, creating directories on the way", async () => {
    const project = await call(t.url, "POST", "/insights/v1/projects", { name: "copyall", account: "acme" });
    const envs: Record<string, string> = {};
    for (const name of ["draft", "test"]) {
      envs[name] = (
        await call(t.url, "POST", `/insights/v1/projects/${project.json.id}/environments`, { name })
      ).json.id;
    }
    await fetch(`${t.url}/resources/v2/data/copyall/draft/a/`, { method: "PUT" });
    await fetch(`${t.url}/resources/v2/data/copyall/draft/a/one.block`, { method: "PUT", body: "{}" });
    await fetch(`${t.url}/resources/v2/data/copyall/draft/two.theme`, { method: "PUT", body: "{}" });
    const res = await call(t.url, "POST", `/insights/v1/projects/${project.json.id}/promotions`, {
      fromEnvironmentID: envs.draft,
      toEnvironmentID: envs.test,
    });
    expect(res.status).toBe(200);
    expect(res.json.resources.map((r: { path: string }) => r.path)).toEqual(["/a/one.block", "/two.theme"]);
    expect((await fetch(`${t.url}/resources/v2/data/copyall/test/a/one.block`)).status).toBe(200);
  });
});
