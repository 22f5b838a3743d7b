// Graceful shutdown (issue 13, item 8) as a WatchReport client sees it: a watch of a report that
// is still being generated ends with UNAVAILABLE ("reconnect elsewhere") when shutdown begins,
// and the shutdown drains cleanly.

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ReportService, ReportState } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type ExampleProject, uploadExample } from "../insights/api-support.js";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer;
let example: ExampleProject;

beforeAll(async () => {
  // No report worker: the report stays queued, so the watch stays open until shutdown.
  t = await startServer({ reportWorker: false });
  example = await uploadExample(t.url);
});
afterAll(() => t?.stop());

it("WatchReport of a report being generated ends UNAVAILABLE when shutdown begins, and the drain is clean", async () => {
  const reports = createClient(ReportService, createGrpcTransport({ baseUrl: t.url }));
  const created = await reports.createReport({
    projectId: example.projectID,
    environmentId: example.environments.draft,
  });
  const key = {
    reportId: created.reportId[0] ?? "",
    projectId: example.projectID,
    environmentId: example.environments.draft,
  };
  const states: ReportState[] = [];
  let firstSeen: () => void = () => {};
  const seen = new Promise<void>((resolve) => {
    firstSeen = resolve;
  });
  const watching = (async () => {
    try {
      for await (const m of reports.watchReport({ key })) {
        states.push(m.status?.state ?? ReportState.UNSPECIFIED);
        firstSeen();
      }
      return undefined;
    } catch (err) {
      return ConnectError.from(err);
    }
  })();
  await seen;
  expect(states).not.toContain(ReportState.GENERATED);
  const result = await t.server.shutdown(5_000, "test");
  const ended = await watching;
  expect(ended?.code).toBe(Code.Unavailable);
  expect(result.drained).toBe(true);
});
