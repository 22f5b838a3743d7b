// Connect GET (issue 13, item 6): the side-effect-free RPCs (idempotency_level = NO_SIDE_EFFECTS)
// are served with HTTP GET, so HTTP caches and a browser's address bar can call them; a GET of a
// method with side effects is refused.

import { toJson } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError, createClient } from "@connectrpc/connect";
import { createTransport } from "@connectrpc/connect/protocol-connect";
import { createNodeHttpClient } from "@connectrpc/connect-node";
import { ProjectService } from "@trove/sdk/gen/trove/insights/v1/projects_pb.js";
import { GraphFormat, ReportService, ReportState } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import { ResourceService, StatResponseSchema } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, type Secured, startSecured } from "./secured.js";

/** A template of the example's draft environment. */
const LETTER = "templates/letters/welcome-letter.template";

let s: Secured;
/** The HTTP method and path of every request the GET client sent. */
const sent: string[] = [];
let resources: Client<typeof ResourceService>;
let stores: Client<typeof StoreService>;
let projects: Client<typeof ProjectService>;
let reports: Client<typeof ReportService>;

beforeAll(async () => {
  s = await startSecured();
  const http = createNodeHttpClient({ httpVersion: "1.1" });
  // The transport connect-node builds, with the HTTP client wrapped to see each request's method.
  const transport = createTransport({
    baseUrl: s.server.url,
    httpClient: (req) => {
      sent.push(`${req.method} ${new URL(req.url).pathname}`);
      return http(req);
    },
    useBinaryFormat: false,
    useHttpGet: true,
    interceptors: [bearer(s.token)],
    acceptCompression: [],
    sendCompression: null,
    compressMinBytes: 1024,
    readMaxBytes: 0xffffffff,
    writeMaxBytes: 0xffffffff,
  });
  resources = createClient(ResourceService, transport);
  stores = createClient(StoreService, transport);
  projects = createClient(ProjectService, transport);
  reports = createClient(ReportService, transport);
}, 60_000);
afterAll(() => s?.stop());

/** The requests `call` made. */
async function requestsOf(call: () => Promise<unknown>): Promise<string[]> {
  const before = sent.length;
  await call();
  return sent.slice(before);
}

async function drain<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const m of stream) out.push(m);
  return out;
}

describe("a Connect client with useHttpGet", () => {
  it("sends every unary NO_SIDE_EFFECTS method as GET, and each answers", async () => {
    const { store } = s.example;
    const key = s.report;
    const cases: [string, () => Promise<unknown>][] = [
      [
        "/trove.resources.v2.ResourceService/Stat",
        async () => expect((await resources.stat({ store, path: "draft" })).resource?.directory).toBe(true),
      ],
      [
        "/trove.resources.v2.StoreService/ListStores",
        async () => expect((await stores.listStores({})).stores.map((x) => x.name)).toContain(store),
      ],
      [
        "/trove.resources.v2.StoreService/GetStore",
        async () => expect((await stores.getStore({ name: store })).store?.name).toBe(store),
      ],
      [
        "/trove.insights.v1.ProjectService/GetProject",
        async () =>
          expect((await projects.getProject({ projectId: key.projectId })).project?.name).toBe("acme-letters"),
      ],
      [
        "/trove.insights.v1.ProjectService/ListProjects",
        async () => expect((await projects.listProjects({})).projects.map((p) => p.id)).toContain(key.projectId),
      ],
      [
        "/trove.insights.v1.ProjectService/GetEnvironment",
        async () =>
          expect(
            (await projects.getEnvironment({ projectId: key.projectId, environmentId: key.environmentId })).environment
              ?.name,
          ).toBe("draft"),
      ],
      [
        "/trove.insights.v1.ProjectService/ListEnvironments",
        async () =>
          expect(
            (await projects.listEnvironments({ projectId: key.projectId })).environments.map((e) => e.name),
          ).toEqual(["draft", "production"]),
      ],
      [
        "/trove.insights.v1.ReportService/GetReport",
        async () => expect((await reports.getReport({ key })).status?.state).toBe(ReportState.GENERATED),
      ],
      [
        "/trove.insights.v1.ReportService/ListReports",
        async () =>
          expect(
            (await reports.listReports({ projectId: key.projectId, environmentId: key.environmentId })).reports.length,
          ).toBe(1),
      ],
      [
        "/trove.insights.v1.ReportService/GetDependencies",
        async () =>
          expect((await reports.getDependencies({ key, path: LETTER })).direct.map((r) => r.path)).toContain(
            "/themes/acme-corporate.theme",
          ),
      ],
      [
        "/trove.insights.v1.ReportService/GetDependents",
        async () => expect((await reports.getDependents({ key, path: LETTER })).resource).toBe(`/${LETTER}`),
      ],
      [
        "/trove.insights.v1.ReportService/ListUnusedResources",
        async () => expect((await reports.listUnusedResources({ key })).resources.length).toBeGreaterThan(0),
      ],
      [
        "/trove.insights.v1.ReportService/ListMissingReferences",
        async () => expect((await reports.listMissingReferences({ key })).references.length).toBeGreaterThan(0),
      ],
      [
        "/trove.insights.v1.ReportService/ListCycles",
        async () => expect((await reports.listCycles({ key })).cycles.length).toBeGreaterThan(0),
      ],
      [
        "/trove.insights.v1.ReportService/ExportGraph",
        async () => expect((await reports.exportGraph({ key, format: GraphFormat.DOT })).text).toMatch(/^digraph /),
      ],
    ];
    for (const [path, call] of cases) {
      expect(await requestsOf(call), path).toEqual([`GET ${path}`]);
    }
  });

  it("sends the streaming NO_SIDE_EFFECTS methods (Read, List, GetReportDocument) as POST: GET is for unary calls", async () => {
    const { store } = s.example;
    const listed = await requestsOf(async () => {
      const parts = await drain(resources.list({ store, path: "draft" }));
      expect(parts[0]?.directory?.path).toBe("draft");
    });
    expect(listed).toEqual(["POST /trove.resources.v2.ResourceService/List"]);
    const entries = (await drain(resources.list({ store, path: "draft", recursive: true }))).flatMap((p) => p.entries);
    const file = entries.find((e) => !e.directory);
    expect(file).toBeDefined();
    const read = await requestsOf(async () => {
      const parts = await drain(resources.read({ store, path: file?.path ?? "" }));
      expect(parts[0]?.resource?.path).toBe(file?.path);
    });
    expect(read).toEqual(["POST /trove.resources.v2.ResourceService/Read"]);
    const document = await requestsOf(() => drain(reports.getReportDocument({ key: s.report })));
    expect(document).toEqual(["POST /trove.insights.v1.ReportService/GetReportDocument"]);
  });

  it("sends a method with side effects as POST", async () => {
    const made = await requestsOf(() => resources.makeDirectory({ store: s.example.store, path: "made-by-post" }));
    expect(made).toEqual(["POST /trove.resources.v2.ResourceService/MakeDirectory"]);
  });
});

describe("a raw HTTP GET", () => {
  const get = (procedure: string, message: unknown, auth: "token" | "none" = "token") =>
    fetch(
      `${s.server.url}/${procedure}?connect=v1&encoding=json&message=${encodeURIComponent(JSON.stringify(message))}`,
      { headers: auth === "none" ? {} : { Authorization: `Bearer ${s.token}` } },
    );

  it("of Stat answers 200 with the JSON response, as POST does", async () => {
    const res = await get("trove.resources.v2.ResourceService/Stat", { store: s.example.store, path: "draft" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    const body = (await res.json()) as { resource: unknown };
    const viaPost = await resources.stat({ store: s.example.store, path: "draft" });
    expect(body).toEqual(toJson(StatResponseSchema, viaPost));
    expect(body.resource).toMatchObject({ store: s.example.store, path: "draft", name: "draft", directory: true });
  });

  it("of GetStore for a missing store answers 404 with the Connect error not_found", async () => {
    const res = await get("trove.resources.v2.StoreService/GetStore", { name: "no-such-store" });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ code: "not_found", message: "store no-such-store not found" });
  });

  it("without a token answers 401 unauthenticated", async () => {
    const res = await get("trove.resources.v2.StoreService/ListStores", {}, "none");
    expect(res.status).toBe(401);
    expect(((await res.json()) as { code: string }).code).toBe("unauthenticated");
  });

  it("of a method with side effects is refused 405 (Allow: POST) with a reason, and changes nothing", async () => {
    const res = await get("trove.resources.v2.StoreService/CreateStore", { name: "made-by-get" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({
      code: "unimplemented",
      message:
        "trove.resources.v2.StoreService/CreateStore has side effects: send it with POST (GET serves only the methods marked NO_SIDE_EFFECTS)",
    });
    const err = await stores.getStore({ name: "made-by-get" }).catch((e) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.NotFound);
  });

  it("of a streaming method is refused 415 with a reason", async () => {
    const res = await get("trove.resources.v2.ResourceService/List", { store: s.example.store, path: "draft" });
    expect(res.status).toBe(415);
    expect(await res.json()).toEqual({
      code: "unimplemented",
      message:
        "trove.resources.v2.ResourceService/List is a server streaming method: the Connect protocol serves GET only for unary methods; send it with POST as a Connect stream",
    });
  });

  it("of Delete is refused 405 and deletes nothing", async () => {
    const res = await get("trove.resources.v2.ResourceService/Delete", { store: s.example.store, path: "draft" });
    expect(res.status).toBe(405);
    expect(((await res.json()) as { message: string }).message).toMatch(
      /^trove.resources.v2.ResourceService\/Delete has side effects/,
    );
    const still = await resources.stat({ store: s.example.store, path: "draft" });
    expect(still.resource?.deleted).toBe(false);
  });
});
