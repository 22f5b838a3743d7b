// A report's life beyond the happy path: generation as a durable job (a job whose worker died is
// taken again once its lease is over), failure after retries, WatchReport over gRPC, 90-day
// availability with an injected clock, and the permission checks of the spec's Authentication.

import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ReportKeySchema, ReportService, ReportState } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UnavailableError } from "../../src/domain/errors.js";
import { DAY_MS } from "../../src/insights/index.js";
import { ReportNotifier } from "../../src/services/report-notifier.js";
import { ReportWorker } from "../../src/services/report-worker.js";
import type { StoragePort } from "../../src/storage/port.js";
import { type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { startServer, type TestServer } from "../support/server.js";
import { call, type ExampleProject, generatedReport, uploadExample } from "./api-support.js";

const REPORTS = "/insights/v1/reports";
const silent = pino({ level: "silent" });

describe("generation is a durable job", () => {
  let clock = Date.now();
  let t: TestServer;
  let example: ExampleProject;
  beforeAll(async () => {
    // No worker in the server: the tests run workers themselves, on the server's storage and clock.
    t = await startServer({ reportWorker: false, now: () => clock });
    example = await uploadExample(t.url);
  });
  afterAll(() => t?.stop());

  async function createReport(): Promise<{ id: string; query: string }> {
    const res = await call(t.url, "POST", REPORTS, {
      projectID: example.projectID,
      environmentID: example.environments.production,
    });
    expect(res.status).toBe(202);
    return {
      id: res.json.reportID[0],
      query: `projectID=${example.projectID}&environmentID=${example.environments.production}`,
    };
  }

  function worker(storage: StoragePort = t.storage, options = {}) {
    return new ReportWorker({
      storage,
      notifier: new ReportNotifier(),
      availabilityMs: 90 * DAY_MS,
      now: () => clock,
      logger: silent,
      ...options,
    });
  }

  it("a job held by a worker that died is taken again once its lease is over", async () => {
    const { id, query } = await createReport();
    // A worker takes the job and dies without a word: its lease runs 30 s.
    const dead = await t.storage.insights.claimReportJob("dead-worker", clock, 30_000);
    expect(dead?.id).toBe(id);
    const live = worker();
    expect(await live.runOnce()).toBe(false);
    expect((await call(t.url, "GET", `${REPORTS}/${id}?${query}`)).json.status).toBe("generating");
    clock += 30_001;
    expect(await live.runOnce()).toBe(true);
    const status = await call(t.url, "GET", `${REPORTS}/${id}?${query}`);
    expect(status.json.status).toBe("generated");
    expect((await t.storage.insights.getReport(id))?.attempts).toBe(2);
  });

  it("a report whose storage stays unavailable becomes failed, with the reason, after its retries", async () => {
    const { id, query } = await createReport();
    // The real storage, with the environment's listing failing as when the database is down.
    const down = new Proxy(t.storage, {
      get(target, name, receiver) {
        if (name === "listNodes") {
          return () => {
            throw new UnavailableError("MongoDB unavailable: connection refused");
          };
        }
        const value = Reflect.get(target, name, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    // Within one claim the worker starts again while the lease lasts (2 s, less a 1 s pause): then it gives up.
    const w = worker(down, { maxAttempts: 2, retryDelayMs: 1000, leaseMs: 2000 });
    expect(await w.runOnce()).toBe(true);
    expect((await call(t.url, "GET", `${REPORTS}/${id}?${query}`)).json.status).toBe("generating");
    clock += 1000;
    expect(await w.runOnce()).toBe(true);
    const status = await call(t.url, "GET", `${REPORTS}/${id}?${query}`);
    expect(status.json).toEqual({
      id: [id],
      creator: "anonymous",
      created: [expect.any(String)],
      status: "failed",
      reason: "generation failed 2 times; last error: MongoDB unavailable: connection refused",
    });
    const doc = await call(t.url, "GET", `${REPORTS}/${id}/document?${query}`);
    expect(doc.status).toBe(404);
  });

  it("a storage outage shorter than the job's lease does not use up an attempt: the worker starts again and generates", async () => {
    const { id, query } = await createReport();
    let failures = 2;
    const flaky = new Proxy(t.storage, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver);
        if (name === "listNodes") {
          return (...args: unknown[]) => {
            if (failures-- > 0) throw new UnavailableError("MongoDB unavailable: connection refused");
            return value.apply(target, args);
          };
        }
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const w = worker(flaky, { maxAttempts: 1, retryDelayMs: 10, leaseMs: 60_000 });
    expect(await w.runOnce()).toBe(true);
    const status = await call(t.url, "GET", `${REPORTS}/${id}?${query}`);
    expect(status.json.status).toBe("generated");
    expect(failures).toBeLessThan(0);
  });

  it("WatchReport (gRPC) sends GENERATING, then GENERATED, and ends", async () => {
    const { id } = await createReport();
    const client = createClient(ReportService, createGrpcTransport({ baseUrl: t.url }));
    const key = create(ReportKeySchema, {
      reportId: id,
      projectId: example.projectID,
      environmentId: example.environments.production,
    });
    const states: ReportState[] = [];
    const expires: number[] = [];
    let href = "";
    const w = worker();
    for await (const message of client.watchReport({ key })) {
      states.push(message.status?.state ?? ReportState.UNSPECIFIED);
      href = message.status?.href ?? "";
      expires.push(Number(message.status?.expires?.seconds ?? 0n) * 1000 + (message.status?.expires?.nanos ?? 0) / 1e6);
      // Generation starts only once the watcher has seen GENERATING.
      if (states.length === 1) await w.runOnce();
    }
    expect(states).toEqual([ReportState.GENERATING, ReportState.GENERATED]);
    // Issue 30: the status says when the report expires (the console's report list shows it): 90
    // days after it was requested while generating, 90 days after it finished once generated.
    const stored = await t.storage.insights.getReport(id);
    expect(expires).toEqual([(stored?.created ?? 0) + 90 * DAY_MS, (stored?.finished ?? 0) + 90 * DAY_MS]);
    expect(href).toBe(
      `${REPORTS}/${id}/document?projectID=${example.projectID}&environmentID=${example.environments.production}`,
    );
  });

  it("a report is available for 90 days after it was generated, then answers 404 and its data is purged", async () => {
    const { id, query } = await createReport();
    await worker().runOnce();
    const generated = await t.storage.insights.getReport(id);
    expect(generated?.status).toBe("generated");
    const finished = generated?.finished ?? 0;
    clock = finished + 90 * DAY_MS - 1;
    expect((await call(t.url, "GET", `${REPORTS}/${id}?${query}`)).status).toBe(200);
    expect((await call(t.url, "GET", `${REPORTS}/${id}/document?${query}`)).status).toBe(200);
    clock = finished + 90 * DAY_MS;
    const status = await call(t.url, "GET", `${REPORTS}/${id}?${query}`);
    expect(status.status).toBe(404);
    expect(status.text).toMatch(/not found .*or expired/);
    expect((await call(t.url, "GET", `${REPORTS}/${id}/document?${query}`)).status).toBe(404);
    // The purge (the server runs it on a timer) deletes the record and the document.
    const stored = generated as NonNullable<typeof generated>;
    await t.storage.purgeExpired(clock);
    expect(await t.storage.insights.getReport(id)).toBeUndefined();
    await expect(async () => {
      for await (const _ of t.storage.insights.readReportDocument(stored)) {
        // reading is enough
      }
    }).rejects.toThrow();
  });

  it("GET with wait answers as soon as the report is generated", async () => {
    const { id, query } = await createReport();
    // No worker has run: the wait ends after its second with the status then.
    const expired = await call(t.url, "GET", `${REPORTS}/${id}?${query}&wait=1`);
    expect(expired.status).toBe(200);
    expect(expired.json.status).toBe("generating");
    const waiting = call(t.url, "GET", `${REPORTS}/${id}?${query}&wait=20`);
    const started = Date.now();
    await new Promise((r) => setTimeout(r, 100));
    await worker().runOnce();
    const res = await waiting;
    expect(res.json.status).toBe("generated");
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(t.server.reportNotifier.waiterCount).toBe(0);
  });
});

describe("Authentication: report:content-insights and full access on project://<account>/<projectname>", () => {
  let issuer: Issuer;
  let t: Awaited<ReturnType<typeof startAuthServer>>;
  let example: ExampleProject;
  const FULL = {
    trove_account: "acme",
    scope: "report:content-insights",
    trove_grants: [
      { store: "*", ops: ["read", "write", "delete"] },
      { project: "project://acme/acme-letters", ops: ["read", "write"] },
    ],
  };
  let full: string;

  beforeAll(async () => {
    issuer = await startIssuer();
    t = await startAuthServer(issuer);
    full = await issuer.token(FULL);
    example = await uploadExample(t.url, "acme-letters", { Authorization: `Bearer ${full}` });
  });
  afterAll(async () => {
    await t?.stop();
    await issuer?.stop();
  });

  const reportRequest = () => ({ projectID: example.projectID, environmentID: example.environments.production });
  async function reports(): Promise<number> {
    return (await t.storage.insights.listReports(example.projectID, example.environments.production)).length;
  }

  it("with both, a report is created and generated; creator is the token's subject", async () => {
    const r = await generatedReport(t.url, example.projectID, example.environments.production, undefined, {
      Authorization: `Bearer ${full}`,
    });
    expect(r.status.json).toMatchObject({ status: "generated", creator: "alice" });
  });

  it.each([
    ["no report:content-insights", { ...FULL, scope: "" }, /lacks the permission report:content-insights/],
    [
      "read-only access on the project",
      { ...FULL, trove_grants: [{ project: "project://acme/acme-letters", ops: ["read"] }] },
      /needs full \(read and write\) access on project:\/\/acme\/acme-letters/,
    ],
    [
      "access on another project",
      { ...FULL, trove_grants: [{ project: "project://acme/brochures", ops: ["read", "write"] }] },
      /needs full .* on project:\/\/acme\/acme-letters/,
    ],
  ])("%s: 403 with the reason, and no report created", async (_name, claims, reason) => {
    const before = await reports();
    const token = await issuer.token(claims);
    const res = await call(t.url, "POST", REPORTS, reportRequest(), { Authorization: `Bearer ${token}` });
    expect(res.status).toBe(403);
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="trove", error="insufficient_scope"');
    expect(res.text).toMatch(reason);
    expect(await reports()).toBe(before);
  });

  it("no token, or an expired one: 401 with a challenge, and no report created", async () => {
    const before = await reports();
    const none = await call(t.url, "POST", REPORTS, reportRequest());
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer realm="trove"/);
    const expired = await issuer.token(FULL, { expiresIn: -120 });
    const res = await call(t.url, "POST", REPORTS, reportRequest(), { Authorization: `Bearer ${expired}` });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toMatch(/error="invalid_token"/);
    expect(await reports()).toBe(before);
  });

  it("getting a report needs the same: without the permission 403", async () => {
    const r = await generatedReport(t.url, example.projectID, example.environments.production, undefined, {
      Authorization: `Bearer ${full}`,
    });
    const token = await issuer.token({ ...FULL, scope: "" });
    const res = await call(t.url, "GET", `${REPORTS}/${r.id}?${r.query}`, undefined, {
      Authorization: `Bearer ${token}`,
    });
    expect(res.status).toBe(403);
  });

  it("project listings show only the projects the caller may read", async () => {
    const other = await issuer.token({
      ...FULL,
      trove_grants: [{ project: "project://acme/brochures", ops: ["read"] }],
    });
    const res = await call(t.url, "GET", "/insights/v1/projects", undefined, { Authorization: `Bearer ${other}` });
    expect(res.status).toBe(200);
    expect(res.json.projects).toEqual([]);
    const mine = await call(t.url, "GET", "/insights/v1/projects", undefined, { Authorization: `Bearer ${full}` });
    expect(mine.json.projects.map((p: { name: string }) => p.name)).toEqual(["acme-letters"]);
  });
});
