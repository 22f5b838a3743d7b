// The SDK's content-insights client and the `trove project` / `trove report` commands against a
// real server: projects by name, createReport, waitForReport (WatchReport, long polls, the
// fallback through an HTTP/1.1-only proxy, a timeout), downloadReport, every query, typed errors.

import { mkdtemp, readFile, rm } from "node:fs/promises";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  BadRequestError,
  ConflictError,
  createInsightsClient,
  ForbiddenError,
  NotFoundError,
  type ReportKey,
  ReportTimeoutError,
  SERVICES,
  type TroveInsightsClient,
} from "../../sdk/src/index.js";
import { type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { type ExampleProject, uploadExample } from "../insights/api-support.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt } from "./build.js";
import { rejection, runTrove } from "./support.js";

vi.setConfig({ testTimeout: 60_000 });

let server: TestServer;
let client: TroveInsightsClient;
let example: ExampleProject;
let key: ReportKey;
let dir: string;

beforeAll(async () => {
  server = await startServer({ reportWorker: { pollInterval: 50 } });
  client = createInsightsClient({ baseUrl: server.url });
  example = await uploadExample(server.url);
  dir = await mkdtemp(join(tmpdir(), "trove-sdk-reports-"));
});
afterAll(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("insights client: projects and environments", () => {
  it("finds projects and environments by name or ID; createTroveClient has projects and reports", async () => {
    const byName = await client.findProject("acme-letters");
    expect(byName.id).toBe(example.projectID);
    expect((await client.findProject(example.projectID)).name).toBe("acme-letters");
    const env = await client.findEnvironment(example.projectID, "production");
    expect(env.id).toBe(example.environments.production);
    expect(Object.keys(SERVICES)).toEqual(["resources", "stores", "changes", "projects", "reports"]);
  });

  it("a duplicate project is a ConflictError (409); an unknown one NotFoundError", async () => {
    const err = await rejection(client.createProject({ name: "acme-letters", account: "acme" }));
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as ConflictError).status).toBe(409);
    expect(await rejection(client.getProject("00000000-0000-4000-8000-000000000000"))).toBeInstanceOf(NotFoundError);
  });
});

describe("insights client: reports", () => {
  beforeAll(async () => {
    key = await client.createReport({
      projectID: example.projectID,
      environmentID: example.environments.draft,
      additionalFields: ["lastPromotedDate"],
    });
  });

  it("createReport answers the key; waitForReport follows WatchReport to generated", async () => {
    expect(key).toEqual({
      reportID: expect.stringMatching(/^[0-9a-f-]{36}$/),
      projectID: example.projectID,
      environmentID: example.environments.draft,
    });
    const seen: string[] = [];
    const status = await client.waitForReport(key, { via: "watch", onStatus: (s) => seen.push(s.status) });
    expect(status).toMatchObject({ id: [key.reportID], status: "generated", creator: "anonymous" });
    expect(status.href).toBe(
      `/insights/v1/reports/${key.reportID}/document?projectID=${key.projectID}&environmentID=${key.environmentID}`,
    );
    expect(seen.at(-1)).toBe("generated");
    // The same through long polls.
    expect((await client.waitForReport(key, { via: "poll" })).status).toBe("generated");
    expect((await client.listReports(key.projectID, key.environmentID)).map((r) => r.id[0])).toContain(key.reportID);
  });

  it("downloadReport: parsed, as a stream, and into a file, all the same document", async () => {
    const doc = await client.downloadReport(key);
    expect(doc.environmentName).toBe("draft");
    expect(doc.resources.every((r) => r.lastPromotedDate === null)).toBe(true);
    const stream = await client.downloadReport(key, { as: "stream" });
    const text = await new Response(stream).text();
    expect(JSON.parse(text)).toEqual(doc);
    const file = join(dir, "report.json");
    const size = await client.downloadReport(key, { as: "file", file });
    const bytes = await readFile(file);
    expect(bytes.byteLength).toBe(size);
    expect(bytes.toString("utf8")).toBe(text);
  });

  it("queries: dependencies, dependents, unused, missing references, cycles, graph", async () => {
    const template = "/templates/letters/payment-reminder.template";
    const deps = await client.dependencies(key, template);
    expect(deps.resource).toBe(template);
    expect(deps.direct.length).toBeGreaterThan(0);
    const first = deps.direct[0]?.path as string;
    expect((await client.dependents(key, first)).direct.map((d) => d.path)).toContain(template);
    expect(Array.isArray(await client.unusedResources(key))).toBe(true);
    const missing = await client.missingReferences(key);
    expect(missing.length).toBeGreaterThan(0);
    const cycles = await client.cycles(key);
    expect(cycles[0]?.cycle[0]).toBe(cycles[0]?.cycle.at(-1));
    expect(await client.graph(key, { format: "dot" })).toMatch(/^digraph /);
    expect(await client.graph(key, { format: "mermaid", root: template })).toMatch(/^flowchart /);
    expect(await rejection(client.dependencies(key, "/no/such.block"))).toBeInstanceOf(NotFoundError);
  });

  it("bad input is a BadRequestError naming the problem", async () => {
    const err = await rejection(
      client.createReport({
        projectID: example.projectID,
        environmentID: "production",
      }),
    );
    expect(err).toBeInstanceOf(BadRequestError);
    expect((err as BadRequestError).reason).toMatch(/environmentID must be a UUID/);
  });

  it("waitForReport falls back to long polls when gRPC is not reachable (an HTTP/1.1-only proxy)", async () => {
    const proxy = http.createServer((req, res) => {
      const upstream = http.request(`${server.url}${req.url}`, { method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      upstream.on("error", () => res.destroy());
      req.pipe(upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    try {
      const proxied = createInsightsClient({ baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` });
      const k = await proxied.createReport({
        projectID: example.projectID,
        environmentID: example.environments.production,
      });
      expect((await proxied.waitForReport(k)).status).toBe("generated");
      expect(await rejection(proxied.waitForReport(k, { via: "watch" }))).toBeInstanceOf(Error);
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });
});

describe("insights client: waiting with no worker, and permissions", () => {
  let idle: TestServer;
  let issuer: Issuer;
  let secured: Awaited<ReturnType<typeof startAuthServer>>;
  beforeAll(async () => {
    idle = await startServer({ reportWorker: false });
    issuer = await startIssuer();
    secured = await startAuthServer(issuer);
  });
  afterAll(async () => {
    await idle?.stop();
    await secured?.stop();
    await issuer?.stop();
  });

  it("waitForReport with a timeout throws ReportTimeoutError carrying the last status", async () => {
    const c = createInsightsClient({ baseUrl: idle.url });
    const project = await c.createProject({ name: "slow", account: "acme" });
    const env = await c.createEnvironment(project.id, "draft");
    const k = await c.createReport({ projectID: project.id, environmentID: env.id });
    const err = await rejection(c.waitForReport(k, { timeoutMs: 500 }));
    expect(err).toBeInstanceOf(ReportTimeoutError);
    expect((err as ReportTimeoutError).status.status).toBe("generating");
  });

  it("a token without report:content-insights gets ForbiddenError (403)", async () => {
    const admin = await issuer.token({
      trove_account: "acme",
      scope: "report:content-insights",
      trove_grants: [
        { store: "*", ops: ["read", "write"] },
        { project: "project://acme/*", ops: ["read", "write"] },
      ],
    });
    const c = createInsightsClient({ baseUrl: secured.url, auth: admin });
    const project = await c.createProject({ name: "secret" });
    const env = await c.createEnvironment(project.id, "draft");
    const weak = await issuer.token({
      trove_account: "acme",
      trove_grants: [{ project: "project://acme/*", ops: ["read", "write"] }],
    });
    const err = await rejection(
      createInsightsClient({ baseUrl: secured.url, auth: weak }).createReport({
        projectID: project.id,
        environmentID: env.id,
      }),
    );
    expect(err).toBeInstanceOf(ForbiddenError);
    expect((err as ForbiddenError).reason).toMatch(/lacks the permission report:content-insights/);
  });
});

describe("trove project / trove report (CLI)", () => {
  function trove(args: string[]) {
    return runTrove([...args, "--url", server.url], { env: { PATH: process.env.PATH, HOME: dir }, cwd: dir });
  }
  beforeAll(() => ensureSdkBuilt(), 300_000);

  it("project list and env show the example; a duplicate project exits 8", async () => {
    const list = await trove(["project", "list"]);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(`${example.projectID}  acme  acme-letters  acme-letters\n`);
    const envs = await trove(["project", "env", "acme-letters"]);
    expect(envs.stdout).toBe(`${example.environments.draft}  draft\n${example.environments.production}  production\n`);
    const dup = await trove(["project", "create", "acme-letters", "--account", "acme"]);
    expect(dup.code).toBe(8);
    expect(dup.stderr).toMatch(/^trove project: 409 /);
  });

  it("report create --wait prints the ID; status, query and download use it; an unknown report exits 3", async () => {
    const created = await trove(["report", "create", "acme-letters", "draft", "--wait"]);
    expect(created.code).toBe(0);
    const id = created.stdout.trim();
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const status = await trove(["report", "status", "acme-letters", "draft", id]);
    expect(status.stdout).toMatch(new RegExp(`^generated  ${id}  \\d{4}-.*Z  anonymous\\n$`));
    const cycles = await trove(["report", "query", "acme-letters", "draft", id, "cycles"]);
    expect(cycles.code).toBe(0);
    expect(cycles.stdout).toMatch(/ {2}-> {2}/);
    const file = join(dir, "cli-report.json");
    expect((await trove(["report", "download", "acme-letters", "draft", id, file])).code).toBe(0);
    expect(JSON.parse(await readFile(file, "utf8")).environmentName).toBe("draft");
    const graph = await trove(["report", "query", "acme-letters", "draft", id, "graph", "--format", "mermaid"]);
    expect(graph.stdout).toMatch(/^flowchart /);
    const unknown = await trove(["report", "status", "acme-letters", "draft", "00000000-0000-4000-8000-000000000000"]);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toMatch(/^trove report: 404 report .* not found/);
  });
});
