// GET /metrics as Prometheus scrapes it: a known set of requests over REST, Connect, gRPC
// (@grpc/grpc-js) and gRPC-Web, then the text format parsed by a real Prometheus text parser and
// the counts compared with what each client saw; no label carries a store name, a path or an id;
// the gauges while a long poll is armed; storage latency, committed changes, report jobs, token
// verifications, build information; and `--metrics false` (404, nothing measured).

import { fileURLToPath } from "node:url";
import { ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import parsePrometheusTextFormat, { type PrometheusFamily } from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJwtAuthenticator } from "../../src/auth/verifier.js";
import { parseServeArgs } from "../../src/server/config.js";
import { TROVE_VERSION } from "../../src/version.js";
import { AUDIENCE, type Issuer, startIssuer } from "../auth/support.js";
import { startServer, TEST_BACKEND, type TestServer } from "../support/server.js";

/** Names that must never appear in a label: the store, the paths and the ids the requests use. */
const STORE = "quokkastore";
const FILE = "ledger-5d2e.txt";
const MISSING = "missing-7a41.txt";
const DIRECTORY = "vault-8c1f";
const ENVIRONMENT = "draft-e3b9";

const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

const CLAIMS = {
  scope: "stores:admin report:content-insights",
  trove_account: "acme",
  trove_grants: [
    { store: "*", ops: ["read", "write", "delete"] },
    { project: "project://*/*", ops: ["read", "write"] },
  ],
};

const PROTO_DIR = fileURLToPath(new URL("../../proto", import.meta.url));
const definition = protoLoader.loadSync(["trove/resources/v2/resources.proto"], {
  includeDirs: [PROTO_DIR],
  longs: String,
  defaults: true,
  oneofs: true,
});
const GrpcResourceService = (
  grpc.loadPackageDefinition(definition) as unknown as {
    trove: { resources: { v2: { ResourceService: grpc.ServiceClientConstructor } } };
  }
).trove.resources.v2.ResourceService;

type Callback = (err: grpc.ServiceError | null, value?: unknown) => void;
interface GrpcResources extends grpc.Client {
  Stat(req: { store: string; path: string }, md: grpc.Metadata, cb: Callback): grpc.ClientUnaryCall;
  MakeDirectory(req: { store: string; path: string }, md: grpc.Metadata, cb: Callback): grpc.ClientUnaryCall;
}

interface Scrape {
  status: number;
  contentType: string | null;
  text: string;
  /** The document as the parser reads it. */
  families: PrometheusFamily[];
  /**
   * The same with every histogram's series read one by one (name_bucket, name_sum, name_count
   * with their labels): the parser merges the series of a labelled histogram into one and drops
   * their labels (yunyu/parse-prometheus-text-format#13), so here their type line says untyped.
   */
  samples: PrometheusFamily[];
}

async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(`${url}/metrics`);
  const text = await res.text();
  return {
    status: res.status,
    contentType: res.headers.get("content-type"),
    text,
    families: res.status === 200 ? parsePrometheusTextFormat(text) : [],
    samples:
      res.status === 200
        ? parsePrometheusTextFormat(text.replace(/^# TYPE (\S+) histogram$/gm, "# TYPE $1 untyped"))
        : [],
  };
}

function family(s: Scrape, name: string, view: "families" | "samples" = "samples"): PrometheusFamily {
  // A histogram's series come label set by label set, name_bucket, name_sum, name_count each time.
  const found = s[view].filter((f) => f.name === name);
  const first = found[0];
  if (first === undefined) throw new Error(`no metric ${name} in the scrape`);
  return { ...first, metrics: found.flatMap((f) => f.metrics) };
}

/** The value of the one sample of `name` whose labels include `labels`. */
function value(s: Scrape, name: string, labels: Record<string, string> = {}): number {
  const samples = family(s, name).metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  if (samples.length !== 1) throw new Error(`${samples.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return Number(samples[0]?.value);
}

/** Every sample of trove_requests_total as "face route status" -> count. */
function requestCounts(s: Scrape): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of family(s, "trove_requests_total").metrics) {
    const l = m.labels ?? {};
    out[`${l.face} ${l.route} ${l.status}`] = Number(m.value);
  }
  return out;
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("GET /metrics", () => {
  let issuer: Issuer;
  let t: TestServer;
  let token = "";
  /** What the clients saw, as "face route status" -> count. */
  const seen: Record<string, number> = {};
  const saw = (face: string, route: string, status: string | number) => {
    const key = `${face} ${route} ${status}`;
    seen[key] = (seen[key] ?? 0) + 1;
  };
  const ids: string[] = [];
  let armed: Scrape;
  let last: Scrape;

  beforeAll(async () => {
    issuer = await startIssuer();
    t = await startServer({
      auth: createJwtAuthenticator({ issuer: issuer.url, audience: AUDIENCE, jwksCooldown: 0 }),
      reportWorker: { pollInterval: 50 },
    });
    token = await issuer.token(CLAIMS);
    const bearer = { Authorization: `Bearer ${token}` };
    const json = { ...bearer, "Content-Type": "application/json" };

    // REST.
    const rest = async (method: string, path: string, route: string, init: RequestInit = {}) => {
      const res = await fetch(`${t.url}${path}`, { method, ...init });
      saw("rest", route, res.status);
      return res;
    };
    const DATA = "/resources/v2/data/{store}/{path}";
    expect(
      (
        await rest("POST", "/resources/v2/stores", "POST /resources/v2/stores", {
          headers: json,
          body: `{"name":"${STORE}"}`,
        })
      ).status,
    ).toBe(201);
    const fileUrl = `/resources/v2/data/${STORE}/${FILE}`;
    expect((await rest("PUT", fileUrl, `PUT ${DATA}`, { headers: bearer, body: "first" })).status).toBe(201);
    expect((await rest("GET", fileUrl, `GET ${DATA}`, { headers: bearer })).status).toBe(200);
    expect((await rest("GET", fileUrl, `GET ${DATA}`, { headers: bearer })).status).toBe(200);
    expect(
      (await rest("GET", `/resources/v2/data/${STORE}/${MISSING}`, `GET ${DATA}`, { headers: bearer })).status,
    ).toBe(404);
    expect(
      (await rest("GET", `/resources/v2/stores/${STORE}`, "GET /resources/v2/stores/{store}", { headers: bearer }))
        .status,
    ).toBe(200);
    expect((await rest("GET", fileUrl, `GET ${DATA}`)).status).toBe(401);
    const foreign = await issuer.token({ ...CLAIMS, aud: "another-service" });
    expect(
      (await rest("GET", fileUrl, `GET ${DATA}`, { headers: { Authorization: `Bearer ${foreign}` } })).status,
    ).toBe(401);

    // Connect (unary and server streaming), over HTTP/1.1.
    const withToken: Interceptor = (next) => (req) => {
      req.header.set("Authorization", `Bearer ${token}`);
      return next(req);
    };
    const rpc = async (face: string, route: string, call: () => Promise<unknown>) => {
      const code: number = await call().then(
        () => 0,
        (err: unknown) => ConnectError.from(err).code,
      );
      const name = CODE_NAMES[code] as string;
      saw(face, route, name);
      return name;
    };
    const collect = async (stream: AsyncIterable<unknown>) => {
      for await (const _ of stream);
    };
    const connect = createConnectTransport({ baseUrl: t.url, httpVersion: "1.1", interceptors: [withToken] });
    const grpcWeb = createGrpcWebTransport({ baseUrl: t.url, httpVersion: "1.1", interceptors: [withToken] });
    const STAT = "trove.resources.v2.ResourceService/Stat";
    const READ = "trove.resources.v2.ResourceService/Read";
    for (const [face, transport] of [
      ["connect", connect],
      ["grpc-web", grpcWeb],
    ] as const) {
      const resources = createClient(ResourceService, transport);
      expect(await rpc(face, STAT, () => resources.stat({ store: STORE, path: FILE }))).toBe("OK");
      expect(await rpc(face, STAT, () => resources.stat({ store: STORE, path: MISSING }))).toBe("NOT_FOUND");
      expect(await rpc(face, READ, () => collect(resources.read({ store: STORE, path: FILE })))).toBe("OK");
      expect(await rpc(face, READ, () => collect(resources.read({ store: STORE, path: MISSING })))).toBe("NOT_FOUND");
    }
    const stores = createClient(StoreService, connect);
    expect(await rpc("connect", "trove.resources.v2.StoreService/ListStores", () => stores.listStores({}))).toBe("OK");

    // gRPC with @grpc/grpc-js over h2c.
    const client = new GrpcResourceService(
      `127.0.0.1:${t.port}`,
      grpc.credentials.createInsecure(),
    ) as unknown as GrpcResources;
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${token}`);
    const grpcCall = (route: string, call: (cb: Callback) => unknown) =>
      new Promise<string>((resolve) => {
        call((err) => {
          const name = CODE_NAMES[err ? err.code : 0] as string;
          saw("grpc", route, name);
          resolve(name);
        });
      });
    try {
      expect(await grpcCall(STAT, (cb) => client.Stat({ store: STORE, path: FILE }, md, cb))).toBe("OK");
      expect(await grpcCall(STAT, (cb) => client.Stat({ store: STORE, path: MISSING }, md, cb))).toBe("NOT_FOUND");
      expect(
        await grpcCall("trove.resources.v2.ResourceService/MakeDirectory", (cb) =>
          client.MakeDirectory({ store: STORE, path: DIRECTORY }, md, cb),
        ),
      ).toBe("OK");
      expect(await grpcCall(STAT, (cb) => client.Stat({ store: STORE, path: FILE }, new grpc.Metadata(), cb))).toBe(
        "UNAUTHENTICATED",
      );
      // A method that does not exist is counted under "unknown", never under its path.
      const bytes = (b: Buffer) => b;
      expect(
        await grpcCall("unknown", (cb) =>
          client.makeUnaryRequest(
            `/trove.resources.v2.ResourceService/NoSuch${STORE}`,
            bytes,
            bytes,
            Buffer.alloc(0),
            md,
            cb,
          ),
        ),
      ).toBe("UNIMPLEMENTED");
    } finally {
      client.close();
    }

    // Insights REST: a project, an environment, a report generated by this instance's worker.
    const project = await rest("POST", "/insights/v1/projects", "POST /insights/v1/projects", {
      headers: json,
      body: JSON.stringify({ name: "metrics", account: "acme", store: STORE }),
    });
    expect(project.status).toBe(201);
    const projectID = ((await project.json()) as { id: string }).id;
    const environment = await rest(
      "POST",
      `/insights/v1/projects/${projectID}/environments`,
      "POST /insights/v1/projects/{project}/environments",
      { headers: json, body: JSON.stringify({ name: ENVIRONMENT }) },
    );
    expect(environment.status).toBe(201);
    const environmentID = ((await environment.json()) as { id: string }).id;
    const report = await rest("POST", "/insights/v1/reports", "POST /insights/v1/reports", {
      headers: json,
      body: JSON.stringify({ projectID, environmentID }),
    });
    expect(report.status).toBe(202);
    const reportID = ((await report.json()) as { reportID: string[] }).reportID[0] as string;
    const status = await rest(
      "GET",
      `/insights/v1/reports/${reportID}?projectID=${projectID}&environmentID=${environmentID}&wait=30`,
      "GET /insights/v1/reports/{report}",
      { headers: bearer },
    );
    expect(((await status.json()) as { status: string }).status).toBe("generated");
    ids.push(projectID, environmentID, reportID);

    // A long poll, armed, scraped, then answered by a write.
    const reset = await rest("GET", "/resources/v2/poll", "GET /resources/v2/poll", { headers: bearer });
    const cursor = new RegExp(`^RESET ${STORE} (\\d+)$`, "m").exec(await reset.text())?.[1];
    expect(cursor).toBeDefined();
    const poll = rest("GET", `/resources/v2/poll?store=${STORE}:${cursor}&wait=30`, "GET /resources/v2/poll", {
      headers: bearer,
    });
    await until(() => t.server.notifier.waiterCount === 1, "the poll to be armed");
    armed = await scrape(t.url);
    saw("other", "GET /metrics", 200);
    expect((await rest("PUT", fileUrl, `PUT ${DATA}`, { headers: bearer, body: "second" })).status).toBe(200);
    expect((await poll).status).toBe(200);
    await until(() => t.server.notifier.waiterCount === 0, "the poll to end");
    last = await scrape(t.url);
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
    await issuer?.stop();
  });

  it("answers 200 in the Prometheus text format, without a token", () => {
    expect(last.status).toBe(200);
    expect(last.contentType).toBe("text/plain; version=0.0.4; charset=utf-8");
  });

  it("counts every request by face, route or RPC method, and status, as each client saw it", () => {
    expect(requestCounts(last)).toEqual(seen);
    expect(family(last, "trove_requests_total", "families").type).toBe("COUNTER");
    expect(family(last, "trove_request_duration_seconds", "families").type).toBe("HISTOGRAM");
    // The durations were observed for the same requests.
    const counts = family(last, "trove_request_duration_seconds_count").metrics;
    expect(counts).toHaveLength(Object.keys(seen).length);
    for (const m of counts) {
      const l = m.labels ?? {};
      expect(Number(m.value)).toBe(seen[`${l.face} ${l.route} ${l.status}`]);
      expect(value(last, "trove_request_duration_seconds_bucket", { ...l, le: "+Inf" })).toBe(Number(m.value));
    }
  });

  it("has no label value, nor any text, naming a store, a path or an id used in the requests", () => {
    for (const name of [STORE, FILE, MISSING, DIRECTORY, ENVIRONMENT, "ledger", ...ids]) {
      expect(last.text).not.toContain(name);
    }
    for (const f of last.families) {
      for (const m of f.metrics) {
        for (const v of Object.values(m.labels ?? {})) expect(v).not.toMatch(/quokka|ledger|vault|missing|draft/);
      }
    }
  });

  it("shows the armed long poll and the requests in flight while it waits", () => {
    expect(value(armed, "trove_change_waiters")).toBe(1);
    expect(value(armed, "trove_requests_in_flight", { face: "rest" })).toBe(1);
    // The scrape itself.
    expect(value(armed, "trove_requests_in_flight", { face: "other" })).toBe(1);
    for (const face of ["connect", "grpc", "grpc-web"]) {
      expect(value(armed, "trove_requests_in_flight", { face })).toBe(0);
    }
    expect(value(last, "trove_change_waiters")).toBe(0);
    expect(value(last, "trove_requests_in_flight", { face: "rest" })).toBe(0);
  });

  it("times storage operations by operation and backend", () => {
    for (const operation of [
      "putFile",
      "getStoreNode",
      "makeDirectory",
      "writeBlob",
      "createStore",
      "claimReportJob",
    ]) {
      expect(
        value(last, "trove_storage_operation_duration_seconds_count", {
          operation,
          backend: TEST_BACKEND,
          outcome: "ok",
        }),
      ).toBeGreaterThan(0);
    }
    for (const m of family(last, "trove_storage_operation_duration_seconds_count").metrics) {
      expect(m.labels?.backend).toBe(TEST_BACKEND);
    }
  });

  it("counts committed changes: two puts, two directories (gRPC and the environment's), no deletion", () => {
    expect(value(last, "trove_change_events_total", { kind: "put" })).toBe(2);
    expect(value(last, "trove_change_events_total", { kind: "mkdir" })).toBe(2);
    expect(value(last, "trove_change_events_total", { kind: "delete" })).toBe(0);
  });

  it("counts the report job this instance generated and its generation time", () => {
    expect(value(last, "trove_report_jobs_total", { outcome: "generated" })).toBe(1);
    expect(value(last, "trove_report_jobs_total", { outcome: "failed" })).toBe(0);
    expect(value(last, "trove_report_jobs_running")).toBe(0);
    expect(value(last, "trove_report_generation_seconds_count", { outcome: "generated" })).toBe(1);
  });

  it("counts one verification per token and cache hits for the rest; refusals as invalid", () => {
    const withToken = Object.entries(seen)
      .filter(([key]) => !key.startsWith("other "))
      .reduce((n, [, count]) => n + count, 0);
    // Requests without a token: the REST GET and the gRPC Stat; the foreign token: one invalid.
    expect(value(last, "trove_token_verifications_total", { result: "valid" })).toBe(1);
    expect(value(last, "trove_token_verifications_total", { result: "invalid" })).toBe(1);
    expect(value(last, "trove_token_verifications_total", { result: "unavailable" })).toBe(0);
    expect(value(last, "trove_token_cache_hits_total")).toBe(withToken - 2 - 1 - 1);
  });

  it("states the build: version, backend and Node.js version", () => {
    expect(family(last, "trove_build_info").metrics).toEqual([
      { labels: { version: TROVE_VERSION, backend: TEST_BACKEND, node: process.version }, value: "1" },
    ]);
  });

  it("includes the process defaults", () => {
    for (const name of [
      "process_cpu_user_seconds_total",
      "process_resident_memory_bytes",
      "nodejs_eventloop_lag_seconds",
    ]) {
      expect(family(last, name).metrics.length).toBeGreaterThan(0);
    }
  });

  it("refuses another method with 405", async () => {
    const res = await fetch(`${t.url}/metrics`, { method: "POST", body: "x" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
  });
});

describe("--metrics false", () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startServer({ metrics: false });
  });
  afterAll(() => t?.stop());

  it("answers 404 at /metrics", async () => {
    await fetch(`${t.url}/resources/v2/stores`);
    const s = await scrape(t.url);
    expect(s.status).toBe(404);
    expect(s.text).toBe("no such endpoint: /metrics\n");
  });

  it("is what `trove serve --metrics false` and TROVE_METRICS=false configure; anything else is refused", () => {
    expect(parseServeArgs([], {})).toMatchObject({ metrics: true });
    expect(parseServeArgs(["--metrics", "false"], {})).toMatchObject({ metrics: false });
    expect(parseServeArgs([], { TROVE_METRICS: "false" })).toMatchObject({ metrics: false });
    expect(() => parseServeArgs(["--metrics", "no"], {})).toThrow('--metrics must be true or false, not "no"');
  });
});
