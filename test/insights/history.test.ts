// Insights and history (docs/insights.md, "A report as of a moment" and "Comparing environments"),
// end to end on a real server: the example project is uploaded, moment A taken (a report then),
// the production environment changed (a reference edited, a resource deleted, one added); then a
// report as of A describes the environment as it was, CompareEnvironments lists exactly the
// changes from A to now, and between two environments what a promotion would change. Refused
// moments (malformed, not yet happened, before the history horizon) store nothing; a job whose
// moment the purge took meanwhile fails with the reason; `trove report diff` prints the changes.

import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Client, Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DiffKind, ReportService, ReportState } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { DAY_MS } from "../../src/insights/index.js";
import { ReportNotifier } from "../../src/services/report-notifier.js";
import { ReportWorker } from "../../src/services/report-worker.js";
import type { ReportRecord } from "../../src/storage/port.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { ensureSdkBuilt } from "../sdk/build.js";
import { runTrove } from "../sdk/support.js";
import { startServer, type TestServer } from "../support/server.js";
import { type Answer, call, EXAMPLE, type ExampleProject, uploadExample } from "./api-support.js";

// A comparison reads both sides' resources, as two reports would: on FerretDB the promotion case
// (an upload, four comparisons, a promotion) takes longer than vitest's default allows.
vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

const REPORTS = "/insights/v1/reports";
const COMPARISON = "/insights/v1/comparison";
const REMINDER = "templates/letters/payment-reminder.template";
const DELETED = "blocks/policy/claims-contact.block";
const ADDED = "blocks/marketing/loyalty-discount.block";

// The server's clock, moved by hand: every change after moment A is a minute later than it, so
// that a time between the two names A whatever the speed of the machine.
let clock = Date.now();
let t: TestServer;
let example: ExampleProject;
let reports: Client<typeof ReportService>;
/** Moment A: the store's last event after the upload, and the time it was made at. */
let eventA: number;
let timeA: number;
/** The report document of production taken at A (a report of "now" then). */
// biome-ignore lint/suspicious/noExplicitAny: a report document as JSON
let documentA: any;
/** The bytes of the files changed after A, for their MD5s. */
let reminderBefore: Buffer;
let reminderAfter: Buffer;
let deletedBytes: Buffer;
let addedBytes: Buffer;

const md5 = (bytes: Buffer) => createHash("md5").update(bytes).digest("base64");
const production = () => example.environments.production;

async function lastEvent(store = example.store): Promise<number> {
  return (await t.storage.getStore(store))?.lastEventId ?? -1;
}

async function put(store: string, path: string, body: Buffer): Promise<void> {
  const res = await fetch(`${t.url}/resources/v2/data/${store}/${path}`, { method: "PUT", body });
  expect(res.status, `PUT ${path}`).toBeLessThan(300);
  await res.arrayBuffer();
}

/** Creates a report (body as the REST face takes it) and waits until it is no longer generating. */
async function reportOf(body: Record<string, unknown>): Promise<{ id: string; query: string; status: Answer }> {
  const created = await call(t.url, "POST", REPORTS, body);
  expect(created.status, created.text).toBe(202);
  const id = created.json.reportID[0] as string;
  const query = `projectID=${body.projectID}&environmentID=${body.environmentID}`;
  for (;;) {
    const status = await call(t.url, "GET", `${REPORTS}/${id}?${query}&wait=10`);
    expect(status.status, status.text).toBe(200);
    if (status.json.status !== "generating") return { id, query, status };
  }
}

async function documentOf(report: { id: string; query: string }) {
  const res = await call(t.url, "GET", `${REPORTS}/${report.id}/document?${report.query}`);
  expect(res.status, res.text).toBe(200);
  return res.json;
}

/** Reports stored for an environment: what "nothing stored" is checked against. */
async function storedReports(projectID = example.projectID, environmentID = production()): Promise<number> {
  return (await t.storage.insights.listReports(projectID, environmentID)).length;
}

function comparison(query: Record<string, string>): Promise<Answer> {
  return call(t.url, "GET", `${COMPARISON}?${new URLSearchParams(query)}`);
}

/** A project whose store keeps no history (keep-versions 0), with an environment and two changes in it. */
async function projectWithoutHistory(name: string) {
  const store = await call(t.url, "POST", "/resources/v2/stores", { name, settings: { "keep-versions": "0" } });
  expect(store.status, store.text).toBe(201);
  const project = await call(t.url, "POST", "/insights/v1/projects", { name, account: "acme", store: name });
  expect(project.status, project.text).toBe(201);
  const environment = await call(t.url, "POST", `/insights/v1/projects/${project.json.id}/environments`, {
    name: "production",
  });
  expect(environment.status, environment.text).toBe(201);
  const first = await lastEvent(name);
  await put(name, "production/a.block", Buffer.from("{}"));
  await put(name, "production/a.block", Buffer.from('{"tags": {"status": "approved"}}'));
  return { projectID: project.json.id as string, environmentID: environment.json.id as string, first };
}

beforeAll(async () => {
  t = await startServer({ reportWorker: { pollInterval: 50 }, now: () => clock });
  reports = createClient(ReportService, createConnectTransport({ baseUrl: t.url, httpVersion: "1.1" }));
  example = await uploadExample(t.url);
  eventA = await lastEvent();
  timeA = clock;
  documentA = await documentOf(await reportOf({ projectID: example.projectID, environmentID: production() }));

  clock += 60_000;
  const store = example.store;
  reminderBefore = await readFile(join(EXAMPLE, "production", REMINDER));
  // The reminder now uses the cross-sell offer instead of the account summary.
  reminderAfter = Buffer.from(
    reminderBefore
      .toString("utf8")
      .replace("../../blocks/billing/account-summary.block", "../../blocks/marketing/cross-sell-offer.block"),
  );
  expect(reminderAfter.equals(reminderBefore)).toBe(false);
  await put(store, `production/${REMINDER}`, reminderAfter);
  deletedBytes = await readFile(join(EXAMPLE, "production", DELETED));
  const deleted = await fetch(`${t.url}/resources/v2/data/${store}/production/${DELETED}`, { method: "DELETE" });
  expect(deleted.status).toBeLessThan(300);
  await deleted.arrayBuffer();
  addedBytes = await readFile(join(EXAMPLE, "draft", ADDED));
  await put(store, `production/${ADDED}`, addedBytes);
}, 120_000);
afterAll(() => t?.stop());

/** What changed in production from A to now, as the REST face answers it. */
const CHANGES_SINCE_A = () => ({
  resources: [
    { change: "added", path: `/${ADDED}`, toMD5: md5(addedBytes) },
    { change: "removed", path: `/${DELETED}`, fromMD5: md5(deletedBytes) },
    { change: "changed", path: `/${REMINDER}`, fromMD5: md5(reminderBefore), toMD5: md5(reminderAfter) },
  ],
  references: [
    {
      change: "added",
      path: `/${ADDED}`,
      kind: "contentBlock",
      target: "/blocks/marketing/cross-sell-offer.block",
    },
    { change: "added", path: `/${ADDED}`, kind: "datamodel", target: "/datamodels/customer.datamodel" },
    { change: "added", path: `/${ADDED}`, kind: "pluggableObject", target: "/plugins/currency-format.plugin" },
    {
      change: "removed",
      path: `/${REMINDER}`,
      kind: "contentBlock",
      target: "/blocks/billing/account-summary.block",
    },
    {
      change: "added",
      path: `/${REMINDER}`,
      kind: "contentBlock",
      target: "/blocks/marketing/cross-sell-offer.block",
    },
  ],
});

describe("a report as of a moment (asOf, Trove's extension)", () => {
  it("a report as of event A describes the environment as it was: the resources and references of the report taken at A", async () => {
    const report = await reportOf({ projectID: example.projectID, environmentID: production(), asOf: String(eventA) });
    expect(report.status.json).toMatchObject({ status: "generated", asOfEvent: eventA });
    const document = await documentOf(report);
    // Everything but when it was requested.
    expect(document.created).toBe(new Date(clock).toISOString());
    expect({ ...document, created: "" }).toEqual({ ...documentA, created: "" });
    // ... which is not the environment now.
    const now = await documentOf(await reportOf({ projectID: example.projectID, environmentID: production() }));
    const paths = (d: { resources: Array<{ path: string }> }) => d.resources.map((r) => r.path);
    expect(paths(now)).toContain(`/${ADDED}`);
    expect(paths(now)).not.toContain(`/${DELETED}`);
    expect(paths(document)).toEqual(paths(documentA));
    expect(paths(document)).toContain(`/${DELETED}`);
  });

  it("asOf as a time (or a JSON number) stands for the event it names; the status and the listing show that event, a report of now none", async () => {
    const byTime = await reportOf({
      projectID: example.projectID,
      environmentID: production(),
      asOf: new Date(timeA + 30_000).toISOString(),
    });
    expect(byTime.status.json).toMatchObject({ status: "generated", asOfEvent: eventA });
    expect({ ...(await documentOf(byTime)), created: "" }).toEqual({ ...documentA, created: "" });
    const byNumber = await reportOf({ projectID: example.projectID, environmentID: production(), asOf: eventA });
    expect(byNumber.status.json.asOfEvent).toBe(eventA);
    const listed = await call(t.url, "GET", `${REPORTS}?${byTime.query}`);
    const records = new Map(listed.json.reports.map((r: { id: string[] }) => [r.id[0], r]));
    expect(records.get(byTime.id)).toMatchObject({ asOfEvent: eventA });
    const now = await reportOf({ projectID: example.projectID, environmentID: production() });
    expect(now.status.json).not.toHaveProperty("asOfEvent");
    expect(Object.keys(now.status.json).sort()).toEqual(["created", "creator", "href", "id", "status"]);
  });

  it("over Connect: CreateReport with as_of; the status carries as_of_event_id", async () => {
    const created = await reports.createReport({
      projectId: example.projectID,
      environmentId: production(),
      asOf: String(eventA),
    });
    const key = { reportId: created.reportId[0] ?? "", projectId: example.projectID, environmentId: production() };
    let last: ReportState | undefined;
    for await (const m of reports.watchReport({ key })) {
      last = m.status?.state;
      expect(m.status?.asOfEventId).toBe(BigInt(eventA));
    }
    expect(last).toBe(ReportState.GENERATED);
  });
});

describe("refused moments: 400 / INVALID_ARGUMENT, 410 / FAILED_PRECONDITION, and nothing stored", () => {
  it.each([
    ["a word", "yesterday", /^asOf "yesterday" is neither an event id \(a whole number\) nor an ISO 8601 date-time/],
    ["a time without a zone", "2026-11-27T15:00:00", /^asOf "2026-11-27T15:00:00" is neither/],
    ["a negative number", -1, /^asOf must be an event id or an ISO 8601 date-time with a time zone, not -1/],
  ])("a malformed asOf (%s): 400 with the reason", async (_name, asOf, reason) => {
    const before = await storedReports();
    const res = await call(t.url, "POST", REPORTS, { projectID: example.projectID, environmentID: production(), asOf });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(res.text).toMatch(reason);
    expect(await storedReports()).toBe(before);
  });

  it("an event that has not happened: 400 naming the store's last event", async () => {
    const before = await storedReports();
    const last = await lastEvent();
    const res = await call(t.url, "POST", REPORTS, {
      projectID: example.projectID,
      environmentID: production(),
      asOf: String(last + 1000),
    });
    expect(res.status).toBe(400);
    expect(res.text).toMatch(new RegExp(`event ${last + 1000} has not happened in store ${example.store}`));
    expect(await storedReports()).toBe(before);
  });

  it("over Connect, a malformed as_of is INVALID_ARGUMENT naming as_of", async () => {
    const before = await storedReports();
    const err = await reports
      .createReport({ projectId: example.projectID, environmentId: production(), asOf: "soon" })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(err?.code).toBe(Code.InvalidArgument);
    expect(err?.rawMessage).toMatch(/^as_of "soon" is neither/);
    expect(await storedReports()).toBe(before);
  });

  it("a moment before the history horizon (a store with keep-versions 0): 410 and FAILED_PRECONDITION, for reports and comparisons", async () => {
    const p = await projectWithoutHistory("no-history");
    const before = await storedReports(p.projectID, p.environmentID);
    const res = await call(t.url, "POST", REPORTS, {
      projectID: p.projectID,
      environmentID: p.environmentID,
      asOf: String(p.first),
    });
    expect(res.status).toBe(410);
    expect(res.text).toMatch(/store no-history keeps no history \(keep-versions 0\)/);
    const grpc = await reports
      .createReport({ projectId: p.projectID, environmentId: p.environmentID, asOf: String(p.first) })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(grpc?.code).toBe(Code.FailedPrecondition);
    expect(grpc?.rawMessage).toMatch(/keeps no history/);
    expect(await storedReports(p.projectID, p.environmentID)).toBe(before);
    const compared = await comparison({ projectID: p.projectID, environmentID: p.environmentID, asOf: "1" });
    expect(compared.status).toBe(410);
    expect(compared.text).toMatch(/keeps no history/);
    // Its present is still there to report and compare.
    const now = await comparison({ projectID: p.projectID, environmentID: p.environmentID });
    expect(now.status).toBe(200);
    expect(now.json.resources).toEqual([]);
  });
});

describe("the purge takes a report's moment before the job runs: the report fails with the reason", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ reportWorker: false });
  });
  afterAll(() => s?.stop());

  it("failed at its first attempt, the reason naming the moment and the horizon", async () => {
    const project = await call(s.url, "POST", "/insights/v1/projects", { name: "purged", account: "acme" });
    const environment = await call(s.url, "POST", `/insights/v1/projects/${project.json.id}/environments`, {
      name: "production",
    });
    const store = project.json.store as string;
    const write = async (body: string) => {
      const res = await fetch(`${s.url}/resources/v2/data/${store}/production/a.block`, { method: "PUT", body });
      expect(res.status).toBeLessThan(300);
      await res.arrayBuffer();
    };
    await write("{}");
    const moment = (await s.storage.getStore(store))?.lastEventId ?? 0;
    await write('{"tags": {"status": "approved"}}');
    const body = { projectID: project.json.id, environmentID: environment.json.id, asOf: String(moment) };
    const created = await call(s.url, "POST", REPORTS, body);
    expect(created.status, created.text).toBe(202);
    // History off: every earlier state goes, and the moment with them.
    const settings = await call(s.url, "PUT", `/resources/v2/stores/${store}`, { settings: { "keep-versions": "0" } });
    expect(settings.status, settings.text).toBeLessThan(300);
    const worker = new ReportWorker({ storage: s.storage, notifier: new ReportNotifier(), availabilityMs: DAY_MS });
    expect(await worker.runOnce()).toBe(true);
    await worker.close();
    const id = created.json.reportID[0] as string;
    const status = await call(
      s.url,
      "GET",
      `${REPORTS}/${id}?projectID=${body.projectID}&environmentID=${body.environmentID}`,
    );
    expect(status.json).toMatchObject({ status: "failed", asOfEvent: moment });
    expect(status.json.reason).toMatch(
      new RegExp(`^the environment as of event ${moment} can no longer be read: store ${store} keeps no history`),
    );
    expect((await s.storage.insights.getReport(id))?.attempts).toBe(1);
  });
});

describe("CompareEnvironments (GET /insights/v1/comparison)", () => {
  it("production from A to now: exactly the resources added, removed and changed, and the references added and removed", async () => {
    const res = await comparison({ projectID: example.projectID, environmentID: production(), asOf: String(eventA) });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.json).toEqual({
      from: { environmentID: production(), environmentName: "production", event: eventA, now: false },
      to: { environmentID: production(), environmentName: "production", event: await lastEvent(), now: true },
      ...CHANGES_SINCE_A(),
    });
    // A time between A and the changes names A; a moment against itself differs in nothing.
    const byTime = await comparison({
      projectID: example.projectID,
      environmentID: production(),
      asOf: new Date(timeA + 30_000).toISOString(),
    });
    expect(byTime.json).toEqual(res.json);
    const same = await comparison({
      projectID: example.projectID,
      environmentID: production(),
      asOf: String(eventA),
      toAsOf: String(eventA),
    });
    expect(same.json).toMatchObject({ resources: [], references: [] });
    // From now back to A: the other way round.
    const back = await comparison({
      projectID: example.projectID,
      environmentID: production(),
      toAsOf: String(eventA),
    });
    expect(back.json.resources.map((r: { change: string; path: string }) => `${r.change} ${r.path}`)).toEqual([
      `removed /${ADDED}`,
      `added /${DELETED}`,
      `changed /${REMINDER}`,
    ]);
  });

  it("over Connect: the same comparison", async () => {
    const out = await reports.compareEnvironments({
      projectId: example.projectID,
      from: { environmentId: production(), asOf: String(eventA) },
      to: {},
    });
    expect(out.from).toMatchObject({ environmentName: "production", eventId: BigInt(eventA), now: false });
    expect(out.to).toMatchObject({ environmentName: "production", now: true });
    expect(out.resources.map((r) => [r.kind, r.path])).toEqual([
      [DiffKind.ADDED, `/${ADDED}`],
      [DiffKind.REMOVED, `/${DELETED}`],
      [DiffKind.CHANGED, `/${REMINDER}`],
    ]);
    expect(out.references).toHaveLength(CHANGES_SINCE_A().references.length);
  });

  it("between two environments: what a promotion would change, which promoting then changes", async () => {
    const p = await uploadExample(t.url, "promotion-check");
    const query = {
      projectID: p.projectID,
      environmentID: p.environments.production,
      toEnvironmentID: p.environments.draft,
    };
    const before = await comparison(query);
    expect(before.status, before.text).toBe(200);
    expect(before.json.from).toMatchObject({ environmentName: "production", now: true });
    expect(before.json.to).toMatchObject({ environmentName: "draft", now: true });
    // examples/acme-letters: what the draft has that production lacks, or has otherwise.
    expect(before.json.resources.map((r: { change: string; path: string }) => `${r.change} ${r.path}`)).toEqual([
      "added /blocks/billing/direct-debit-mandate.block",
      "changed /blocks/marketing/cross-sell-offer.block",
      "added /blocks/marketing/loyalty-discount.block",
      "added /templates/letters/direct-debit-mandate.template",
      "changed /templates/letters/payment-reminder.template",
      "changed /templates/letters/welcome-letter.template",
      "added /themes/acme-2027.theme",
    ]);
    expect(before.json.references.length).toBeGreaterThan(0);
    const promotedAt = await lastEvent(p.store);
    const promoted = await call(t.url, "POST", `/insights/v1/projects/${p.projectID}/promotions`, {
      fromEnvironmentID: p.environments.draft,
      toEnvironmentID: p.environments.production,
    });
    expect(promoted.status, promoted.text).toBe(200);
    // What the promotion changed in production is exactly what the comparison listed.
    const changed = await comparison({
      projectID: p.projectID,
      environmentID: p.environments.production,
      asOf: String(promotedAt),
    });
    expect(changed.json.resources).toEqual(before.json.resources);
    expect(changed.json.references).toEqual(before.json.references);
    const after = await comparison(query);
    expect(after.json).toMatchObject({ resources: [], references: [] });
  });

  it.each([
    [{ asOf: "yesterday" }, 400, /^asOf "yesterday" is neither/],
    [{ toAsOf: "2026-13-01" }, 400, /^toAsOf "2026-13-01" is neither/],
    [{ toEnvironmentID: "draft" }, 400, /^toEnvironmentID must be a UUID/],
    [{ environmentID: "" }, 400, /^environmentID is required/],
    [{ colour: "red" }, 400, /^unknown query parameter colour/],
    [
      { toEnvironmentID: "00000000-0000-4000-8000-000000000000" },
      404,
      /environment 00000000-0000-4000-8000-000000000000 not found/,
    ],
  ])("refused: %j answers %i with the reason", async (extra, status, reason) => {
    const res = await comparison({ projectID: example.projectID, environmentID: production(), ...extra });
    expect(res.status).toBe(status);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(res.text).toMatch(reason);
  });

  it("POST is 405 with Allow: GET", async () => {
    const res = await call(t.url, "POST", `${COMPARISON}?projectID=${example.projectID}`, {});
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET");
  });
});

describe("access: the decisions of creating a report, on each side", () => {
  let issuer: Issuer;
  let s: Awaited<ReturnType<typeof startAuthServer>>;
  let p: ExampleProject;
  const FULL = {
    trove_account: "acme",
    scope: "report:content-insights",
    trove_grants: [
      { store: "*", ops: ["read", "write", "delete"] },
      { project: "project://acme/acme-letters", ops: ["read", "write"] },
    ],
  };
  beforeAll(async () => {
    issuer = await startIssuer();
    s = await startAuthServer(issuer);
    p = await uploadExample(s.url, "acme-letters", { Authorization: `Bearer ${await issuer.token(FULL)}` });
  });
  afterAll(async () => {
    await s?.stop();
    await issuer?.stop();
  });

  it.each([
    ["the permission and full access", 200, FULL, /./],
    ["no report:content-insights", 403, { ...FULL, scope: "" }, /lacks the permission report:content-insights/],
    [
      "read-only access on the project",
      403,
      { ...FULL, trove_grants: [{ project: "project://acme/acme-letters", ops: ["read"] }] },
      /needs full \(read and write\) access on project:\/\/acme\/acme-letters/,
    ],
  ])("%s: %i", async (_name, status, claims, reason) => {
    const token = await issuer.token(claims);
    const query = new URLSearchParams({
      projectID: p.projectID,
      environmentID: p.environments.production,
      toEnvironmentID: p.environments.draft,
    });
    const res = await call(s.url, "GET", `${COMPARISON}?${query}`, undefined, { Authorization: `Bearer ${token}` });
    expect(res.status, res.text).toBe(status);
    expect(res.text).toMatch(reason);
  });
});

describe("trove report diff, trove report create --as-of (CLI)", () => {
  let dir: string;
  const children = new Set<ChildProcess>();
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "trove-insights-history-"));
    await ensureSdkBuilt();
  }, 300_000);
  afterAll(async () => {
    for (const child of children) child.kill();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  const trove = (args: string[]) =>
    runTrove([...args, "--url", t.url], { env: { PATH: process.env.PATH, HOME: dir }, cwd: dir, children });

  it("prints '+ path', '- path', '~ path', then the references; --json is the REST answer", async () => {
    const text = await trove(["report", "diff", "acme-letters", "production", "--as-of", String(eventA)]);
    expect(text.stderr).toBe("");
    expect(text.code).toBe(0);
    expect(text.stdout).toBe(
      [
        `+ /${ADDED}`,
        `- /${DELETED}`,
        `~ /${REMINDER}`,
        `+ /${ADDED} -> /blocks/marketing/cross-sell-offer.block  contentBlock`,
        `+ /${ADDED} -> /datamodels/customer.datamodel  datamodel`,
        `+ /${ADDED} -> /plugins/currency-format.plugin  pluggableObject`,
        `- /${REMINDER} -> /blocks/billing/account-summary.block  contentBlock`,
        `+ /${REMINDER} -> /blocks/marketing/cross-sell-offer.block  contentBlock`,
        "",
      ].join("\n"),
    );
    const json = await trove(["report", "diff", "acme-letters", "production", "--as-of", String(eventA), "--json"]);
    const rest = await comparison({ projectID: example.projectID, environmentID: production(), asOf: String(eventA) });
    expect(JSON.parse(json.stdout)).toEqual(rest.json);
    const none = await trove(["report", "diff", "acme-letters", "production", "production"]);
    expect(none).toMatchObject({ code: 0, stdout: "" });
  });

  it("report create --as-of: the status line shows the event; a malformed moment exits 2, one before the horizon 3", async () => {
    const created = await trove([
      "report",
      "create",
      "acme-letters",
      "production",
      "--as-of",
      String(eventA),
      "--wait",
    ]);
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const id = created.stdout.trim();
    const status = await trove(["report", "status", "acme-letters", "production", id]);
    expect(status.stdout).toMatch(new RegExp(`^generated  ${id}  .*  anonymous  as-of ${eventA}\\n$`));
    const bad = await trove(["report", "diff", "acme-letters", "production", "--as-of", "yesterday"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--as-of "yesterday" is neither/);
    const gone = await trove(["report", "create", "no-history", "production", "--as-of", "1"]);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toMatch(/410.*keeps no history/);
  });
});

describe("SQLite: a data directory made before asOf", () => {
  it("gains the column at open; its reports read as now, and an as-of report keeps its event", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "trove-insights-column-"));
    try {
      const expiresAt = Date.now() + DAY_MS;
      const report = (id: string, asOfEventId?: number): ReportRecord => ({
        id,
        projectId: "0b6f3c1e-5a7d-4c2b-9e8f-1a2b3c4d5e6f",
        environmentId: "7d9e1f20-3b4c-4d5e-8f60-718293a4b5c6",
        creator: "ann",
        created: 1,
        additionalFields: [],
        status: "generating",
        finished: 0,
        expiresAt,
        reason: "",
        attempts: 0,
        leaseOwner: "",
        leaseExpires: 0,
        document: null,
        ...(asOfEventId === undefined ? {} : { asOfEventId }),
      });
      const older = "c3a1e0f4-9b2d-4e6f-a718-29304a5b6c7d";
      let storage = await SqliteStorage.open({ dataDir });
      await storage.insights.createReport(report(older));
      await storage.close();
      // As a version without the column left it.
      const db = new Database(join(dataDir, "trove.db"));
      db.exec("ALTER TABLE reports DROP COLUMN as_of_event_id");
      db.close();
      storage = await SqliteStorage.open({ dataDir });
      try {
        expect(await storage.insights.getReport(older)).toEqual(report(older));
        const asOf = "d4b2f1a5-0c3e-4f70-b829-3a415b6c7d8e";
        await storage.insights.createReport(report(asOf, 42));
        expect((await storage.insights.getReport(asOf))?.asOfEventId).toBe(42);
      } finally {
        await storage.close();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
