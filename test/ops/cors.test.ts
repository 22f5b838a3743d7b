// CORS (--cors-origin): a browser page on an allowed origin may call REST v2, Connect and gRPC-Web, and
// one on any other origin may not. Each face gets a preflight and an actual cross-origin call, from
// the allowed and from a refused origin, and the answers are judged as a browser judges them (the
// Fetch standard's CORS check and preflight check), with the real Connect and gRPC-Web clients.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevIssuer, openDevIssuer } from "../../src/auth/dev-issuer.js";
import { parseServeArgs } from "../../src/server/config.js";
import { startServer, type TestServer } from "../support/server.js";

const ALLOWED = "https://app.example.com";
const REFUSED = "https://elsewhere.example.net";

/** Request headers a page may send without asking (Fetch: CORS-safelisted request-headers, simplified). */
const SAFELISTED_REQUEST = new Set(["accept", "accept-language", "content-language"]);
/** Response headers a page may read without them being exposed (Fetch: CORS-safelisted response-header names). */
const SAFELISTED_RESPONSE = new Set([
  "cache-control",
  "content-language",
  "content-length",
  "content-type",
  "expires",
  "last-modified",
  "pragma",
]);

const list = (value: string | null) =>
  (value ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== "");

/** The browser's CORS check of a response (Fetch, 4.9): may a page of `origin` read it? */
function corsCheck(headers: Headers, origin: string): boolean {
  return headers.get("access-control-allow-origin") === origin;
}

/** The browser's preflight check (Fetch, 4.8, without credentials): may the actual request be sent? */
function preflightAllows(res: Response, origin: string, method: string, requestHeaders: string[]): boolean {
  if (res.status < 200 || res.status > 299 || !corsCheck(res.headers, origin)) return false;
  const methods = list(res.headers.get("access-control-allow-methods"));
  if (!["get", "head", "post"].includes(method.toLowerCase()) && !methods.includes(method.toLowerCase())) return false;
  const allowed = list(res.headers.get("access-control-allow-headers"));
  return requestHeaders.every((h) => SAFELISTED_REQUEST.has(h.toLowerCase()) || allowed.includes(h.toLowerCase()));
}

/** Whether a page may read a response header (safelisted, or in Access-Control-Expose-Headers). */
function readable(headers: Headers, name: string): boolean {
  return (
    SAFELISTED_RESPONSE.has(name.toLowerCase()) ||
    list(headers.get("access-control-expose-headers")).includes(name.toLowerCase())
  );
}

function preflight(t: TestServer, path: string, origin: string, method: string, headers: string[]) {
  return fetch(`${t.url}${path}`, {
    method: "OPTIONS",
    headers: {
      Origin: origin,
      "Access-Control-Request-Method": method,
      "Access-Control-Request-Headers": headers.join(","),
    },
  });
}

/** A client that sends `Origin` as a browser would, and keeps the response headers of its last call. */
function browserClient(t: TestServer, protocol: "connect" | "grpc-web", origin: string, token: string) {
  const seen: { headers?: Headers } = {};
  const asBrowser: Interceptor = (next) => async (req) => {
    req.header.set("Origin", origin);
    req.header.set("Authorization", `Bearer ${token}`);
    const res = await next(req);
    seen.headers = res.header;
    return res;
  };
  const options = { baseUrl: t.url, httpVersion: "1.1" as const, interceptors: [asBrowser] };
  const transport = protocol === "connect" ? createConnectTransport(options) : createGrpcWebTransport(options);
  return { client: createClient(StoreService, transport) as Client<typeof StoreService>, seen };
}

describe("CORS with --cors-origin https://app.example.com", () => {
  let dir: string;
  let issuer: DevIssuer;
  let t: TestServer;
  let token: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "trove-cors-"));
    issuer = await openDevIssuer({ dataDir: dir });
    t = await startServer({ auth: issuer.authenticator, devIssuer: issuer, corsOrigins: [ALLOWED] });
    token = await issuer.issue();
  });
  afterAll(async () => {
    await t?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const rest = (method: string, path: string, origin: string, headers: Record<string, string> = {}, body?: string) =>
    fetch(`${t.url}${path}`, {
      method,
      headers: { Origin: origin, Authorization: `Bearer ${token}`, ...headers },
      body,
    });

  describe("REST v2", () => {
    it("PUT: the preflight (no token) allows PUT with Authorization, Content-Type and If-Match; the answer's ETag and Location are readable", async () => {
      const pre = await preflight(t, "/resources/v2/data/home/cors.txt", ALLOWED, "PUT", [
        "authorization",
        "content-type",
        "if-match",
      ]);
      expect(pre.status).toBe(204);
      expect(preflightAllows(pre, ALLOWED, "PUT", ["authorization", "content-type", "if-match"])).toBe(true);
      expect(Number(pre.headers.get("access-control-max-age"))).toBeGreaterThan(0);
      expect(pre.headers.get("access-control-allow-credentials")).toBeNull();
      expect(list(pre.headers.get("vary"))).toContain("origin");

      const put = await rest(
        "PUT",
        "/resources/v2/data/home/cors.txt",
        ALLOWED,
        { "Content-Type": "text/plain" },
        "hello",
      );
      expect(put.status).toBe(201);
      expect(corsCheck(put.headers, ALLOWED)).toBe(true);
      expect(put.headers.get("access-control-allow-credentials")).toBeNull();
      expect(list(put.headers.get("vary"))).toContain("origin");
      for (const name of ["ETag", "Location", "Last-Modified-Millis", "Content-MD5", "X-Request-Id"]) {
        expect(readable(put.headers, name), name).toBe(true);
      }
    });

    it("GET: the preflight allows If-None-Match; the contents and ETag are readable", async () => {
      await rest("PUT", "/resources/v2/data/home/read.txt", ALLOWED, {}, "contents");
      const pre = await preflight(t, "/resources/v2/data/home/read.txt", ALLOWED, "GET", [
        "authorization",
        "if-none-match",
      ]);
      expect(preflightAllows(pre, ALLOWED, "GET", ["authorization", "if-none-match"])).toBe(true);
      const get = await rest("GET", "/resources/v2/data/home/read.txt", ALLOWED);
      expect(get.status).toBe(200);
      expect(corsCheck(get.headers, ALLOWED)).toBe(true);
      expect(readable(get.headers, "ETag")).toBe(true);
      expect(await get.text()).toBe("contents");
    });

    it("an error answer (401 without a token) is readable too, with its WWW-Authenticate", async () => {
      const res = await fetch(`${t.url}/resources/v2/stores`, { headers: { Origin: ALLOWED } });
      expect(res.status).toBe(401);
      expect(corsCheck(res.headers, ALLOWED)).toBe(true);
      expect(readable(res.headers, "WWW-Authenticate")).toBe(true);
    });

    it("a refused origin: the preflight answers 403 with a reason and no CORS headers; the actual answer has none either", async () => {
      const pre = await preflight(t, "/resources/v2/data/home/cors.txt", REFUSED, "PUT", ["authorization"]);
      expect(pre.status).toBe(403);
      expect(await pre.text()).toBe(`cross-origin requests from "${REFUSED}" are not allowed (--cors-origin)\n`);
      expect(preflightAllows(pre, REFUSED, "PUT", ["authorization"])).toBe(false);
      for (const name of [
        "access-control-allow-origin",
        "access-control-allow-methods",
        "access-control-allow-headers",
      ]) {
        expect(pre.headers.get(name), name).toBeNull();
      }
      expect(list(pre.headers.get("vary"))).toContain("origin");

      const get = await rest("GET", "/resources/v2/data/home/read.txt", REFUSED);
      expect(corsCheck(get.headers, REFUSED)).toBe(false);
      expect(get.headers.get("access-control-allow-origin")).toBeNull();
      expect(get.headers.get("access-control-expose-headers")).toBeNull();
      expect(list(get.headers.get("vary"))).toContain("origin");
    });

    it("a request without Origin (same origin, or not a browser) gets no CORS headers but Vary: Origin", async () => {
      const res = await fetch(`${t.url}/resources/v2/stores`, { headers: { Authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      expect(list(res.headers.get("vary"))).toContain("origin");
    });
  });

  describe("Connect (unary, the Connect client)", () => {
    const headers = ["authorization", "content-type", "connect-protocol-version", "connect-timeout-ms"];

    it("the preflight allows POST with Connect's headers; the call from the allowed origin is readable", async () => {
      const pre = await preflight(t, `/${StoreService.typeName}/ListStores`, ALLOWED, "POST", headers);
      expect(pre.status).toBe(204);
      expect(preflightAllows(pre, ALLOWED, "POST", headers)).toBe(true);
      const { client, seen } = browserClient(t, "connect", ALLOWED, token);
      const out = await client.listStores({}, { timeoutMs: 10_000 });
      expect(out.stores.map((s) => s.name)).toContain("home");
      expect(corsCheck(seen.headers as Headers, ALLOWED)).toBe(true);
      expect(list((seen.headers as Headers).get("vary"))).toContain("origin");
    });

    it("a refused origin: the preflight is refused; the call's answer carries no CORS headers", async () => {
      const pre = await preflight(t, `/${StoreService.typeName}/ListStores`, REFUSED, "POST", headers);
      expect(pre.status).toBe(403);
      expect(preflightAllows(pre, REFUSED, "POST", headers)).toBe(false);
      const { client, seen } = browserClient(t, "connect", REFUSED, token);
      await client.listStores({});
      expect(corsCheck(seen.headers as Headers, REFUSED)).toBe(false);
      expect((seen.headers as Headers).get("access-control-allow-origin")).toBeNull();
    });
  });

  describe("gRPC-Web (the gRPC-Web client)", () => {
    const headers = ["authorization", "content-type", "x-grpc-web", "x-user-agent", "grpc-timeout"];

    it("the preflight allows POST with gRPC-Web's headers; grpc-status and grpc-message are readable", async () => {
      const pre = await preflight(t, `/${StoreService.typeName}/ListStores`, ALLOWED, "POST", headers);
      expect(pre.status).toBe(204);
      expect(preflightAllows(pre, ALLOWED, "POST", headers)).toBe(true);
      const { client, seen } = browserClient(t, "grpc-web", ALLOWED, token);
      const out = await client.listStores({}, { timeoutMs: 10_000 });
      expect(out.stores.map((s) => s.name)).toContain("home");
      const h = seen.headers as Headers;
      expect(corsCheck(h, ALLOWED)).toBe(true);
      for (const name of ["grpc-status", "grpc-message", "grpc-status-details-bin"]) {
        expect(readable(h, name), name).toBe(true);
      }
    });

    it("a refused origin: the preflight is refused; the call's answer carries no CORS headers", async () => {
      const pre = await preflight(t, `/${StoreService.typeName}/ListStores`, REFUSED, "POST", headers);
      expect(pre.status).toBe(403);
      expect(preflightAllows(pre, REFUSED, "POST", headers)).toBe(false);
      const { client, seen } = browserClient(t, "grpc-web", REFUSED, token);
      await client.listStores({});
      expect(corsCheck(seen.headers as Headers, REFUSED)).toBe(false);
      expect((seen.headers as Headers).get("access-control-expose-headers")).toBeNull();
    });
  });
});

describe("without --cors-origin: same origin only", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startServer();
  });
  afterAll(async () => {
    await t.stop();
  });

  it("a preflight is not answered (405), and no answer carries CORS headers", async () => {
    const pre = await preflight(t, "/resources/v2/stores", ALLOWED, "GET", ["authorization"]);
    expect(pre.status).toBe(405);
    expect(preflightAllows(pre, ALLOWED, "GET", ["authorization"])).toBe(false);
    const res = await fetch(`${t.url}/resources/v2/stores`, { headers: { Origin: ALLOWED } });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("--cors-origin", () => {
  it("is repeatable, also from TROVE_CORS_ORIGIN (comma-separated), and none by default", () => {
    const parse = (args: string[], env: NodeJS.ProcessEnv = {}) => {
      const config = parseServeArgs(args, env);
      if (config === "help") throw new Error("help");
      return config.corsOrigins;
    };
    expect(parse([])).toEqual([]);
    expect(parse(["--cors-origin", "https://a.example", "--cors-origin", "http://localhost:5173"])).toEqual([
      "https://a.example",
      "http://localhost:5173",
    ]);
    expect(parse([], { TROVE_CORS_ORIGIN: "https://a.example, https://b.example:8443" })).toEqual([
      "https://a.example",
      "https://b.example:8443",
    ]);
  });

  it("refuses a wildcard, a path or anything that is not an http(s) origin, saying what an origin is", () => {
    for (const bad of ["*", "https://a.example/app", "a.example", "ftp://a.example", "https://*.example.com", ""]) {
      expect(() => parseServeArgs(["--cors-origin", bad], {}), bad).toThrow(
        /--cors-origin must be an origin such as https:\/\/app\.example\.com/,
      );
    }
  });
});
