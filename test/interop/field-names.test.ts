// Error messages name the inputs as each face carries them: the RPC faces (Connect, gRPC,
// gRPC-Web) name the proto fields (`project_id`, `if_match`, `content_md5`), the REST face keeps
// its own names (`projectID`, `If-Match`, `Content-MD5`). The same mistake is sent to every face.

import { createHash } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ProjectService } from "@trove/sdk/gen/trove/insights/v1/projects_pb.js";
import { ReportService } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import {
  ResourceService,
  type WriteHeaderSchema,
  type WriteRequestSchema,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";

const UNKNOWN = "00000000-0000-4000-8000-000000000000";
const UUID_RULE = "must be a UUID (8-4-4-4-12 hexadecimal digits)";

let t: TestServer;
let projectId: string;
let draft: string;
let production: string;
/** The store of the project, where its environments are top-level directories. */
let store: string;
/** The ETag of /draft/a.txt. */
let draftTag: string;

interface RestAnswer {
  status: number;
  type: string | null;
  text: string;
}

async function rest(
  method: string,
  path: string,
  init: { json?: unknown; body?: string; headers?: Record<string, string> } = {},
): Promise<RestAnswer> {
  const headers: Record<string, string> = { ...init.headers };
  let body = init.body;
  if (init.json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(init.json);
  }
  const res = await fetch(`${t.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  return { status: res.status, type: res.headers.get("content-type"), text: await res.text() };
}

function md5(text: string): string {
  return createHash("md5").update(text).digest("base64");
}

beforeAll(async () => {
  t = await startServer({ reportWorker: false });
  const projects = createClient(ProjectService, createConnectTransport({ baseUrl: t.url, httpVersion: "1.1" }));
  const { project } = await projects.createProject({ name: "field-names", account: "acme" });
  projectId = project?.id ?? "";
  store = project?.store ?? "";
  draft = (await projects.createEnvironment({ projectId, name: "draft" })).environment?.id ?? "";
  production = (await projects.createEnvironment({ projectId, name: "production" })).environment?.id ?? "";
  const put = await rest("PUT", `/resources/v2/data/${store}/draft/a.txt`, { body: "one" });
  expect(put.status).toBe(201);
  expect((await rest("PUT", `/resources/v2/data/${store}/draft/dir/`)).status).toBe(201);
  const head = await fetch(`${t.url}/resources/v2/data/${store}/draft/a.txt`, { method: "HEAD" });
  draftTag = (head.headers.get("etag") ?? "").replaceAll('"', "");
});
afterAll(() => t?.stop());

describe("REST names its own inputs", () => {
  /** A 400/412 text/plain answer with exactly this reason. */
  function expectReason(answer: RestAnswer, status: number, reason: string) {
    expect(answer).toEqual({ status, type: "text/plain; charset=utf-8", text: `${reason}\n` });
  }

  it("a project ID that is not a UUID names projectID", async () => {
    expectReason(await rest("GET", "/insights/v1/projects/nope"), 400, `projectID ${UUID_RULE}, not "nope"`);
  });

  it("an environment ID that is not a UUID names environmentID", async () => {
    expectReason(
      await rest("GET", `/insights/v1/projects/${projectId}/environments/nope`),
      400,
      `environmentID ${UUID_RULE}, not "nope"`,
    );
  });

  it("a promotion between the same environment names fromEnvironmentID and toEnvironmentID", async () => {
    const answer = await rest("POST", `/insights/v1/projects/${projectId}/promotions`, {
      json: { fromEnvironmentID: draft, toEnvironmentID: draft },
    });
    expectReason(answer, 400, "fromEnvironmentID and toEnvironmentID are the same environment");
  });

  it("a promotion with a bad source environment names fromEnvironmentID", async () => {
    const answer = await rest("POST", `/insights/v1/projects/${projectId}/promotions`, {
      json: { fromEnvironmentID: "nope", toEnvironmentID: production },
    });
    expectReason(answer, 400, `fromEnvironmentID ${UUID_RULE}, not "nope"`);
  });

  it("a promoted directory with a precondition names ifMatch", async () => {
    const answer = await rest("POST", `/insights/v1/projects/${projectId}/promotions`, {
      json: { fromEnvironmentID: draft, toEnvironmentID: production, resources: [{ path: "/dir", ifMatch: "x" }] },
    });
    expectReason(answer, 400, "/dir is a directory: ifMatch applies to one resource");
  });

  it("a promotion whose precondition fails names If-Match, as a PUT would", async () => {
    const answer = await rest("POST", `/insights/v1/projects/${projectId}/promotions`, {
      json: {
        fromEnvironmentID: draft,
        toEnvironmentID: production,
        resources: [{ path: "/a.txt", ifMatch: "stale" }],
      },
    });
    expectReason(answer, 412, "nothing promoted: /a.txt: If-Match given but the resource does not exist");
  });

  it("a report request names projectID, environmentID and additionalFields", async () => {
    const answer = await rest("POST", "/insights/v1/reports", {
      json: { environmentID: "nope", additionalFields: ["colour"] },
    });
    expectReason(
      answer,
      400,
      `projectID is required; environmentID ${UUID_RULE}, not "nope"; additionalFields: "colour" is not allowed; allowed: lastPromotedDate, lastPromotedBy`,
    );
  });

  it("a report list with a bad project names projectID", async () => {
    const answer = await rest("GET", `/insights/v1/reports?projectID=nope&environmentID=${draft}`);
    expectReason(answer, 400, `projectID ${UUID_RULE}, not "nope"`);
  });

  it("a report status with a bad report ID names reportID", async () => {
    const answer = await rest("GET", `/insights/v1/reports/nope?projectID=${projectId}&environmentID=${draft}`);
    expectReason(answer, 400, `reportID ${UUID_RULE}, not "nope"`);
  });

  it("a stale precondition on PUT, MKDIR and DELETE names If-Match", async () => {
    const path = `/resources/v2/data/${store}/draft/a.txt`;
    const stale = { "If-Match": '"stale"' };
    const mismatch = `If-Match does not match the current ETag "${draftTag}"`;
    expectReason(await rest("PUT", path, { body: "two", headers: stale }), 412, mismatch);
    expectReason(await rest("DELETE", path, { headers: stale }), 412, mismatch);
    expectReason(
      await rest("PUT", `/resources/v2/data/${store}/draft/new/`, { headers: stale }),
      412,
      "If-Match given but the resource does not exist",
    );
  });

  it("a malformed or mismatched Content-MD5 and an invalid Content-Type name the headers", async () => {
    const path = `/resources/v2/data/${store}/draft/b.txt`;
    expectReason(
      await rest("PUT", path, { body: "x", headers: { "Content-MD5": "nope" } }),
      400,
      "Content-MD5 must be the base64 text of a 16-byte MD5 digest",
    );
    expectReason(
      await rest("PUT", path, { body: "x", headers: { "Content-MD5": md5("y") } }),
      400,
      `Content-MD5 mismatch: the contents have MD5 ${md5("x")}`,
    );
    expectReason(
      await rest("PUT", path, { body: "x", headers: { "Content-Type": "not a type" } }),
      400,
      'invalid Content-Type "not a type"',
    );
  });
});

const TRANSPORTS: Record<string, () => Transport> = {
  Connect: () => createConnectTransport({ baseUrl: t.url, httpVersion: "1.1" }),
  gRPC: () => createGrpcTransport({ baseUrl: t.url }),
  "gRPC-Web": () => createGrpcWebTransport({ baseUrl: t.url, httpVersion: "2" }),
};

async function rejection(call: Promise<unknown>): Promise<{ code: Code; message: string }> {
  try {
    await call;
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, message: e.rawMessage };
  }
  throw new Error("the call succeeded");
}

async function* writeMessages(
  header: MessageInitShape<typeof WriteHeaderSchema>,
  contents: string,
): AsyncIterable<MessageInitShape<typeof WriteRequestSchema>> {
  yield { part: { case: "header" as const, value: header } };
  yield { part: { case: "chunk" as const, value: Buffer.from(contents) } };
}

describe.each(Object.keys(TRANSPORTS))("%s names the proto fields", (protocol) => {
  let projects: Client<typeof ProjectService>;
  let reports: Client<typeof ReportService>;
  let resources: Client<typeof ResourceService>;

  beforeAll(() => {
    const transport = TRANSPORTS[protocol]?.() as Transport;
    projects = createClient(ProjectService, transport);
    reports = createClient(ReportService, transport);
    resources = createClient(ResourceService, transport);
  });

  const invalid = (message: string) => ({ code: Code.InvalidArgument, message });

  it("a project ID that is not a UUID names project_id", async () => {
    expect(await rejection(projects.getProject({ projectId: "nope" }))).toEqual(
      invalid(`project_id ${UUID_RULE}, not "nope"`),
    );
    expect(await rejection(projects.listEnvironments({ projectId: "" }))).toEqual(invalid("project_id is required"));
  });

  it("an environment ID that is not a UUID names environment_id", async () => {
    expect(await rejection(projects.getEnvironment({ projectId, environmentId: "nope" }))).toEqual(
      invalid(`environment_id ${UUID_RULE}, not "nope"`),
    );
  });

  it("a promotion between the same environment names from_environment_id and to_environment_id", async () => {
    expect(await rejection(projects.promote({ projectId, fromEnvironmentId: draft, toEnvironmentId: draft }))).toEqual(
      invalid("from_environment_id and to_environment_id are the same environment"),
    );
  });

  it("a promotion with a bad source environment names from_environment_id", async () => {
    expect(
      await rejection(projects.promote({ projectId, fromEnvironmentId: "nope", toEnvironmentId: production })),
    ).toEqual(invalid(`from_environment_id ${UUID_RULE}, not "nope"`));
    expect(await rejection(projects.promote({ projectId, fromEnvironmentId: draft, toEnvironmentId: "" }))).toEqual(
      invalid("to_environment_id is required"),
    );
  });

  it("a promoted directory with a precondition names if_match", async () => {
    const call = projects.promote({
      projectId,
      fromEnvironmentId: draft,
      toEnvironmentId: production,
      resources: [{ path: "/dir", ifMatch: "x" }],
    });
    expect(await rejection(call)).toEqual(invalid("/dir is a directory: if_match applies to one resource"));
  });

  it("a promotion whose precondition fails names if_match in the result", async () => {
    const out = await projects.promote({
      projectId,
      fromEnvironmentId: draft,
      toEnvironmentId: production,
      resources: [{ path: "/a.txt", ifMatch: "stale" }],
    });
    expect(out.resources.map((r) => ({ path: r.path, error: r.error, code: r.code }))).toEqual([
      { path: "/a.txt", error: "if_match given but the resource does not exist", code: "failed_precondition" },
    ]);
  });

  it("a report request names project_id, environment_id and additional_fields", async () => {
    const call = reports.createReport({ projectId: "", environmentId: "nope", additionalFields: ["colour"] });
    expect(await rejection(call)).toEqual(
      invalid(
        `project_id is required; environment_id ${UUID_RULE}, not "nope"; additional_fields: "colour" is not allowed; allowed: lastPromotedDate, lastPromotedBy`,
      ),
    );
  });

  it("a report list with a bad project names project_id", async () => {
    expect(await rejection(reports.listReports({ projectId: "nope", environmentId: draft }))).toEqual(
      invalid(`project_id ${UUID_RULE}, not "nope"`),
    );
  });

  it("a report key with bad IDs names report_id, project_id and environment_id", async () => {
    const call = reports.getReport({ key: { reportId: "nope", projectId: "", environmentId: UNKNOWN.slice(1) } });
    expect(await rejection(call)).toEqual(
      invalid(
        `report_id ${UUID_RULE}, not "nope"; project_id is required; environment_id ${UUID_RULE}, not "${UNKNOWN.slice(1)}"`,
      ),
    );
  });

  it("a stale precondition on Write, MakeDirectory and Delete names if_match", async () => {
    const stale = { store, path: "draft/a.txt", ifMatch: ['"stale"'] };
    const mismatch = {
      code: Code.FailedPrecondition,
      message: `if_match does not match the current ETag "${draftTag}"`,
    };
    expect(await rejection(resources.write(writeMessages(stale, "two")))).toEqual(mismatch);
    expect(await rejection(resources.delete(stale))).toEqual(mismatch);
    expect(await rejection(resources.makeDirectory({ store, path: "draft/new", ifMatch: ["stale"] }))).toEqual({
      code: Code.FailedPrecondition,
      message: "if_match given but the resource does not exist",
    });
  });

  it("a malformed or mismatched content_md5 and an invalid content_type name the fields", async () => {
    const target = { store, path: "draft/b.txt" };
    expect(await rejection(resources.write(writeMessages({ ...target, contentMd5: "nope" }, "x")))).toEqual(
      invalid("content_md5 must be the base64 text of a 16-byte MD5 digest"),
    );
    expect(await rejection(resources.write(writeMessages({ ...target, contentMd5: md5("y") }, "x")))).toEqual(
      invalid(`content_md5 mismatch: the contents have MD5 ${md5("x")}`),
    );
    expect(await rejection(resources.write(writeMessages({ ...target, contentType: "not a type" }, "x")))).toEqual(
      invalid('invalid content_type "not a type"'),
    );
  });
});
