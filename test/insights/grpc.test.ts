// The insights services over gRPC and Connect: the same core as the REST face, with the codes of
// connect-errors.ts (InvalidArgument, NotFound, AlreadyExists, PermissionDenied).

import { type Client, Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ProjectService } from "@trove/sdk/gen/trove/insights/v1/projects_pb.js";
import { GraphFormat, ReportService, ReportState } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import { type ExampleProject, uploadExample } from "./api-support.js";

let t: TestServer;
let example: ExampleProject;
let projects: Client<typeof ProjectService>;
let reports: Client<typeof ReportService>;

beforeAll(async () => {
  t = await startServer({ reportWorker: { pollInterval: 50 } });
  example = await uploadExample(t.url);
  projects = createClient(ProjectService, createGrpcTransport({ baseUrl: t.url }));
  reports = createClient(ReportService, createConnectTransport({ baseUrl: t.url, httpVersion: "1.1" }));
});
afterAll(() => t?.stop());

async function code(promise: Promise<unknown>): Promise<Code | undefined> {
  try {
    await promise;
    return undefined;
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

describe("ProjectService over gRPC", () => {
  it("CreateProject, GetProject and ListProjects", async () => {
    const { project } = await projects.createProject({ name: "grpc-project", account: "acme" });
    expect(project?.store).toBe("grpc-project");
    const got = await projects.getProject({ projectId: project?.id ?? "" });
    expect(got.project?.name).toBe("grpc-project");
    const { projects: all } = await projects.listProjects({});
    expect(all.map((p) => p.name)).toContain("grpc-project");
  });

  it("CreateEnvironment and ListEnvironments; a duplicate is AlreadyExists", async () => {
    const { environments } = await projects.listEnvironments({ projectId: example.projectID });
    expect(environments.map((e) => e.name)).toEqual(["draft", "production"]);
    expect(await code(projects.createEnvironment({ projectId: example.projectID, name: "draft" }))).toBe(
      Code.AlreadyExists,
    );
  });

  it("a bad project ID is InvalidArgument, an unknown one NotFound", async () => {
    expect(await code(projects.getProject({ projectId: "x" }))).toBe(Code.InvalidArgument);
    expect(await code(projects.getProject({ projectId: "00000000-0000-4000-8000-000000000000" }))).toBe(Code.NotFound);
  });
});

describe("ReportService over Connect", () => {
  it("CreateReport, WatchReport to GENERATED, GetReportDocument bytes equal the REST document, queries", async () => {
    const created = await reports.createReport({
      projectId: example.projectID,
      environmentId: example.environments.draft,
      additionalFields: ["lastPromotedBy"],
    });
    expect(created.reportId).toHaveLength(1);
    const key = {
      reportId: created.reportId[0] ?? "",
      projectId: example.projectID,
      environmentId: example.environments.draft,
    };
    const states: ReportState[] = [];
    for await (const m of reports.watchReport({ key })) states.push(m.status?.state ?? ReportState.UNSPECIFIED);
    expect(states.at(-1)).toBe(ReportState.GENERATED);

    const chunks: Uint8Array[] = [];
    for await (const m of reports.getReportDocument({ key })) chunks.push(m.chunk);
    const viaRpc = Buffer.concat(chunks).toString("utf8");
    const rest = await fetch(
      `${t.url}/insights/v1/reports/${key.reportId}/document?projectID=${key.projectId}&environmentID=${key.environmentId}`,
    );
    expect(viaRpc).toBe(await rest.text());
    const doc = JSON.parse(viaRpc);
    expect(
      doc.resources.every((r: Record<string, unknown>) => "lastPromotedBy" in r && !("lastPromotedDate" in r)),
    ).toBe(true);

    const cycles = await reports.listCycles({ key });
    expect(cycles.cycles.length).toBeGreaterThan(0);
    const missing = await reports.listMissingReferences({ key });
    expect(missing.references.length).toBeGreaterThan(0);
    const graph = await reports.exportGraph({ key, format: GraphFormat.DOT });
    expect(graph.text).toMatch(/^digraph /);
    expect(await code(reports.exportGraph({ key }))).toBe(Code.InvalidArgument);
    const listed = await reports.listReports({
      projectId: example.projectID,
      environmentId: example.environments.draft,
    });
    expect(listed.reports.map((r) => r.id[0])).toContain(key.reportId);
  });

  it("bad input is InvalidArgument with every problem named", async () => {
    try {
      await reports.createReport({ projectId: "", environmentId: "nope", additionalFields: ["colour"] });
      expect.unreachable();
    } catch (err) {
      const e = ConnectError.from(err);
      expect(e.code).toBe(Code.InvalidArgument);
      expect(e.rawMessage).toBe(
        'project_id is required; environment_id must be a UUID (8-4-4-4-12 hexadecimal digits), not "nope"; additional_fields: "colour" is not allowed; allowed: lastPromotedDate, lastPromotedBy',
      );
    }
  });
});
