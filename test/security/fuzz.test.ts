// Seeded, bounded fuzzing of every face (issue 12, item 4): random methods, paths, headers and
// small bodies on REST, Connect, gRPC-Web (HTTP/1.1 and h2c) and gRPC, with and without a token.
// Nothing a client sends may earn a 5xx, an Internal or Unknown RPC status, or a reset before
// an answer. TROVE_FUZZ_SEED replays a run; TROVE_FUZZ_REQUESTS changes its length.

import * as http2 from "node:http2";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ADMIN, type AuthServer, type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { envelope, grpcWebTrailers, h1Request, h2Request, type RawAnswer } from "./rpc-client.js";

const SEED = Number(process.env.TROVE_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const REQUESTS = Number(process.env.TROVE_FUZZ_REQUESTS ?? 10_000);
const CONCURRENCY = 24;

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(list: readonly T[]): T => list[int(list.length)] as T;
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => int(256)));
  return { next, int, pick, bytes };
}

// Long-waiting RPCs (WatchChanges, WatchReport, Poll) are left out: they wait by design.
const RPCS = [
  "trove.resources.v2.ResourceService/Stat",
  "trove.resources.v2.ResourceService/Read",
  "trove.resources.v2.ResourceService/Write",
  "trove.resources.v2.ResourceService/MakeDirectory",
  "trove.resources.v2.ResourceService/Delete",
  "trove.resources.v2.ResourceService/List",
  "trove.resources.v2.StoreService/ListStores",
  "trove.resources.v2.StoreService/CreateStore",
  "trove.resources.v2.StoreService/GetStore",
  "trove.resources.v2.StoreService/UpdateStore",
  "trove.resources.v2.StoreService/DeleteStore",
  "trove.insights.v1.ProjectService/CreateProject",
  "trove.insights.v1.ProjectService/GetProject",
  "trove.insights.v1.ProjectService/ListProjects",
  "trove.insights.v1.ProjectService/Promote",
  "trove.insights.v1.ReportService/GetReport",
  "trove.insights.v1.ReportService/ListReports",
  "trove.insights.v1.ReportService/GetDependencies",
  "trove.insights.v1.ReportService/ExportGraph",
  "trove.resources.v2.ResourceService/NoSuchMethod",
  "trove.nosuch.v1.Service/Method",
];
const REST_PATHS = [
  "/resources/v2/data/home/",
  "/resources/v2/data/home/a.txt",
  "/resources/v2/data/home/dir/",
  "/resources/v2/data/fuzz/x/y/z.tpl",
  "/resources/v2/data/",
  "/resources/v2/stores",
  "/resources/v2/stores/fuzz",
  "/resources/v2/stores/home",
  "/resources/v2/poll",
  "/resources/v2/",
  "/insights/v1/projects",
  "/insights/v1/projects/p1",
  "/insights/v1/projects/p1/environments",
  "/insights/v1/projects/p1/promotions",
  "/insights/v1/reports",
  "/insights/v1/reports/r1/dependencies",
  "/",
  "/healthz",
  "/metrics",
];
const PATH_NOISE = ["", "%", "%2F", "%00", "%C3%A9", "%ZZ", "..", "../..", "//", "?", "?a=b&a=c", "#", ";", "~", "é"];
const QUERIES = ["", "?recursive=true", "?include-access=true&include-blob=true", "?wait=0", "?store=home:0&wait=0"];
const QUERY_NOISE = ["?store=home:abc", "?store=:", "?wait=-1", "?wait=1e9", "?%=%", "?projectID=&environmentID="];
const METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "PROPFIND", "TRACE"];
const CONTENT_TYPES = [
  undefined,
  "application/xml",
  "application/json",
  "text/plain",
  "application/octet-stream",
  "application/proto",
  "application/connect+proto",
  "application/connect+json",
  "application/grpc",
  "application/grpc+json",
  "application/grpc-web+proto",
  "application/grpc-web-text",
  "multipart/form-data; boundary=x",
  "application/json; charset=utf-16",
];
const TEXT_BODIES = [
  '<store name="fuzz" type="recursive"/>',
  '<stores><store name="f"><store-settings><setting><name>keep-deleted</name><value>1d</value></setting></store-settings></store></stores>',
  "<store><__proto__/></store>",
  '<!DOCTYPE x [<!ENTITY a "b">]><store name="&a;"/>',
  `${"<a>".repeat(200)}`,
  '{"name":"fuzz","type":"recursive"}',
  '{"name":"p1","account":"acme","store":"home"}',
  `{"resources":${"[".repeat(300)}${"]".repeat(300)}}`,
  '{"__proto__":{"x":1},"constructor":{}}',
  "{",
  "null",
  '"\\ud800"',
  "\u0000\u0001\u0002",
];

function randomBody(r: ReturnType<typeof prng>, contentType: string | undefined): Buffer | undefined {
  switch (r.int(6)) {
    case 0:
      return undefined;
    case 1:
      return Buffer.from(r.pick(TEXT_BODIES));
    case 2:
      return r.bytes(r.int(64));
    case 3:
      return envelope(r.bytes(r.int(48)), r.pick([0, 0, 0, 1, 2, 0x80]));
    case 4: {
      // A plausible message in an envelope: field tags with random values.
      const inner = Buffer.concat([
        Buffer.from([0x0a, 4]),
        Buffer.from("home"),
        Buffer.from([0x12, 3, 0x61, 0x2f, 0x62]),
      ]);
      return contentType?.includes("proto") || contentType?.includes("grpc") ? envelope(inner) : inner;
    }
    default: {
      const e = envelope(r.bytes(8));
      e.writeUInt32BE(r.pick([0, 1, 1000, 0x7fffffff]), 1);
      return e;
    }
  }
}

let issuer: Issuer;
let t: AuthServer;
let token: string;
const sessions: http2.ClientHttp2Session[] = [];

beforeAll(async () => {
  issuer = await startIssuer();
  t = await startAuthServer(issuer, { pollWait: 0 });
  token = await issuer.token(ADMIN);
  for (let i = 0; i < 2; i++) sessions.push(http2.connect(t.url));
});

afterAll(async () => {
  for (const s of sessions) s.close();
  await t?.stop();
  await issuer?.stop();
});

interface Sent {
  face: string;
  transport: "h1" | "h2";
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

function generate(r: ReturnType<typeof prng>): Sent {
  const face = r.pick(["rest", "rest", "connect", "grpc-web", "grpc"]);
  const transport = face === "grpc" || r.next() < 0.5 ? "h2" : "h1";
  const headers: Record<string, string> = {};
  const auth = r.int(5);
  if (auth <= 2) headers.authorization = `Bearer ${token}`;
  else if (auth === 3)
    headers.authorization = r.pick(["Bearer x.y.z", "Basic Zm9vOmJhcg==", "Bearer", `Bearer ${token}x`]);
  let method = r.pick(METHODS);
  let path: string;
  let contentType = r.pick(CONTENT_TYPES);
  if (face === "rest") {
    path = r.pick(REST_PATHS) + (r.next() < 0.3 ? r.pick(PATH_NOISE) : "");
    path += r.next() < 0.3 ? r.pick(QUERY_NOISE) : r.pick(QUERIES);
    if (r.next() < 0.2) headers["if-match"] = r.pick(['"abc"', "*", "W/x", '"a", "b"', ",,", '"']);
    if (r.next() < 0.2) headers["if-none-match"] = r.pick(['"abc"', "*", "", '"x" ,']);
  } else {
    path = `/${r.pick(RPCS)}`;
    method = r.next() < 0.9 ? "POST" : r.pick(METHODS);
    if (face === "grpc") {
      contentType = r.pick(["application/grpc", "application/grpc+proto", "application/grpc+json", contentType]);
      headers.te = "trailers";
      if (r.next() < 0.2) headers["grpc-encoding"] = r.pick(["gzip", "identity", "br", "x"]);
      headers["grpc-timeout"] = r.pick(["2S", "1S", "10m", "bad"]);
    } else if (face === "grpc-web") {
      contentType = r.pick([
        "application/grpc-web",
        "application/grpc-web+proto",
        "application/grpc-web+json",
        contentType,
      ]);
      headers["grpc-timeout"] = "2S";
    } else {
      contentType = r.pick(["application/proto", "application/json", "application/connect+proto", contentType]);
      headers["connect-protocol-version"] = r.pick(["1", "1", "2"]);
      headers["connect-timeout-ms"] = r.pick(["2000", "-1", "x"]);
      if (r.next() < 0.2) headers["content-encoding"] = r.pick(["gzip", "identity", "zz"]);
    }
  }
  if (contentType !== undefined) headers["content-type"] = contentType;
  if (r.next() < 0.1) headers[r.pick(["x-request-id", "accept", "x-custom"])] = r.pick(["é", "a".repeat(300), "\t"]);
  const body = method === "GET" || method === "HEAD" ? undefined : randomBody(r, contentType);
  return { face, transport, method, path, headers, body };
}

function problem(sent: Sent, answer: RawAnswer): string | undefined {
  if (
    answer.status >= 500 &&
    // 501 is Connect's answer for UNIMPLEMENTED (an unknown method or encoding), and REST's for an unknown HTTP method.
    !(
      answer.status === 501 &&
      (/"code":"unimplemented"/.test(answer.body.toString()) ||
        !["GET", "HEAD", "PUT", "POST", "DELETE"].includes(sent.method))
    )
  )
    return `HTTP ${answer.status}: ${answer.body.toString().slice(0, 200)}`;
  const grpcStatus =
    answer.trailers["grpc-status"] ??
    answer.headers["grpc-status"] ??
    (answer.headers["content-type"]?.startsWith("application/grpc-web")
      ? grpcWebTrailers(answer.body)["grpc-status"]
      : undefined);
  if (grpcStatus === "13" || grpcStatus === "2") {
    return `grpc-status ${grpcStatus}: ${answer.trailers["grpc-message"] ?? answer.headers["grpc-message"] ?? grpcWebTrailers(answer.body)["grpc-message"]}`;
  }
  const text = answer.body.toString();
  if (answer.headers["content-type"]?.startsWith("application/json") && /"code":"(internal|unknown)"/.test(text)) {
    return `Connect error: ${text.slice(0, 200)}`;
  }
  if (/"error":\{"code":"(internal|unknown)"/.test(text)) return `Connect end of stream: ${text.slice(0, 200)}`;
  return undefined;
}

async function send(sent: Sent, index: number): Promise<RawAnswer | "not sent"> {
  try {
    if (sent.transport === "h2") {
      const session = sessions[index % sessions.length] as http2.ClientHttp2Session;
      return await h2Request(session, sent.method, sent.path, sent.headers, sent.body);
    }
    return await h1Request(t.port, sent.method, sent.path, sent.headers, sent.body);
  } catch (err) {
    // What Node's own clients refuse to send is not a request the server saw.
    const code = (err as NodeJS.ErrnoException).code ?? "";
    if (/^ERR_(INVALID|HTTP2_INVALID|UNESCAPED)/.test(code)) return "not sent";
    throw err;
  }
}

it(`answers ${REQUESTS} random requests on every face without a 5xx, Internal or reset (seed ${SEED})`, {
  timeout: 120_000,
}, async () => {
  console.log(`fuzz seed ${SEED} (TROVE_FUZZ_SEED=${SEED} replays it)`);
  const r = prng(SEED);
  const plan = Array.from({ length: REQUESTS }, () => generate(r));
  const failures: string[] = [];
  let answered = 0;
  let next = 0;
  const worker = async () => {
    while (next < plan.length && failures.length < 10) {
      const index = next++;
      const sent = plan[index] as Sent;
      try {
        const answer = await send(sent, index);
        if (answer === "not sent") continue;
        answered++;
        const p = problem(sent, answer);
        if (p) failures.push(`#${index} ${sent.face}/${sent.transport} ${sent.method} ${sent.path}: ${p}`);
      } catch (err) {
        failures.push(
          `#${index} ${sent.face}/${sent.transport} ${sent.method} ${sent.path} ${JSON.stringify(sent.headers).slice(0, 300)} body ${sent.body?.length}: ${(err as Error).message}`,
        );
      }
      if (sessions.some((s) => s.destroyed || s.closed)) {
        failures.push(`#${index}: the h2 session was closed by the server`);
        for (let i = 0; i < sessions.length; i++) if (sessions[i]?.destroyed) sessions[i] = http2.connect(t.url);
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  expect(failures).toEqual([]);
  expect(answered).toBeGreaterThan(REQUESTS * 0.9);
});
