// GET /openapi.json serves docs/openapi.yaml (one source: the served document is the parsed file), the
// document is valid OpenAPI 3.1, and every operation it describes reaches a route of the server that
// answers with one of the operation's documented statuses (never "no such endpoint" or 405).

import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type DevIssuer, openDevIssuer } from "../../src/auth/dev-issuer.js";
import { startServer, type TestServer } from "../support/server.js";

const DOCUMENT = fileURLToPath(new URL("../../docs/openapi.yaml", import.meta.url));

interface Operation {
  responses: Record<string, unknown>;
  security?: unknown[];
  requestBody?: { content: Record<string, unknown> };
}
type OpenApi = { openapi: string; paths: Record<string, Record<string, Operation>> };

const METHODS = ["get", "head", "put", "post", "delete"] as const;

describe("GET /openapi.json", () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startServer();
  });
  afterAll(async () => {
    await t.stop();
  });

  it("answers without a token the parsed docs/openapi.yaml, as JSON", async () => {
    const res = await fetch(`${t.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.get("etag")).toMatch(/^"[\w-]+"$/);
    expect(await res.json()).toEqual(parse(readFileSync(DOCUMENT, "utf8")));
  });

  it("HEAD gives the headers, If-None-Match with the ETag a 304, and POST a 405 with Allow", async () => {
    const get = await fetch(`${t.url}/openapi.json`);
    const etag = get.headers.get("etag") as string;
    const head = await fetch(`${t.url}/openapi.json`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(get.headers.get("content-length"));
    expect(await head.text()).toBe("");
    const cached = await fetch(`${t.url}/openapi.json`, { headers: { "If-None-Match": etag } });
    expect(cached.status).toBe(304);
    const post = await fetch(`${t.url}/openapi.json`, { method: "POST", body: "x" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    expect(await post.text()).toBe("method POST not allowed on /openapi.json\n");
  });

  it("is a valid OpenAPI 3.1 document (the official JSON Schema of the specification)", async () => {
    const document = (await (await fetch(`${t.url}/openapi.json`)).json()) as Parameters<Validator["validate"]>[0];
    const validator = new Validator();
    const result = await validator.validate(document);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });
});

describe("every operation of docs/openapi.yaml answers on a live server", () => {
  const document = parse(readFileSync(DOCUMENT, "utf8")) as OpenApi;
  let dir: string;
  let issuer: DevIssuer;
  let t: TestServer;
  let token: string;
  /** Values for the path parameters and the required query parameters, from real fixtures. */
  const values: Record<string, string> = {};

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "trove-openapi-"));
    issuer = await openDevIssuer({ dataDir: dir });
    t = await startServer({ auth: issuer.authenticator, devIssuer: issuer, pollWait: 1000 });
    token = await issuer.issue();
    const auth = { Authorization: `Bearer ${token}` };
    const json = async (method: string, path: string, body: unknown) => {
      const res = await fetch(`${t.url}${path}`, {
        method,
        headers: { ...auth, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(res.status, `${method} ${path}`).toBeLessThan(300);
      return (await res.json()) as Record<string, unknown>;
    };
    const put = async (path: string, body?: string) => {
      const res = await fetch(`${t.url}/resources/v2/data/${path}`, { method: "PUT", headers: auth, body });
      expect(res.status, `PUT ${path}`).toBe(201);
    };
    const project = await json("POST", "/insights/v1/projects", { name: "letters" });
    const environment = await json("POST", `/insights/v1/projects/${project.id}/environments`, { name: "draft" });
    await put(`${project.store}/draft/blocks/`);
    await put(`${project.store}/draft/blocks/footer.block`, JSON.stringify({ name: "footer" }));
    const report = await json("POST", "/insights/v1/reports", {
      projectID: project.id,
      environmentID: environment.id,
    });
    const reportID = (report.reportID as string[])[0] as string;
    const query = `projectID=${project.id}&environmentID=${environment.id}`;
    const status = await fetch(`${t.url}/insights/v1/reports/${reportID}?${query}&wait=60`, { headers: auth });
    expect(((await status.json()) as { status: string }).status).toBe("generated");
    Object.assign(values, {
      store: project.store as string,
      path: "draft",
      name: project.store as string,
      projectID: project.id as string,
      environmentID: environment.id as string,
      reportID,
      format: "dot",
    });
    values["query:path"] = "/blocks/footer.block";
  }, 90_000);

  afterAll(async () => {
    await t?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** The operations in the document's order, deletions last (they remove the fixtures). */
  const operations = Object.entries(document.paths)
    .flatMap(([path, item]) =>
      METHODS.filter((m) => item[m] !== undefined).map((method) => ({
        path,
        method,
        operation: item[method] as Operation,
      })),
    )
    .sort((a, b) => Number(a.method === "delete") - Number(b.method === "delete"));

  it("describes REST v2, insights, the development issuer and the open endpoints", () => {
    const paths = Object.keys(document.paths);
    for (const prefix of ["/resources/v2/data/", "/resources/v2/stores", "/resources/v2/poll", "/insights/v1/"]) {
      expect(paths.some((p) => p.startsWith(prefix))).toBe(true);
    }
    expect(paths).toEqual(
      expect.arrayContaining([
        "/auth/.well-known/openid-configuration",
        "/auth/jwks",
        "/auth/token",
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
      ]),
    );
  });

  it.each(operations.map((o) => [`${o.method.toUpperCase()} ${o.path}`, o] as const))(
    "%s answers a documented status (a read of the fixtures: a success)",
    async (_label, { path, method, operation }) => {
      const target = path.replace(/\{(\w+)\}/g, (_m, name: string) => {
        const value = values[name];
        if (value === undefined) throw new Error(`no fixture for {${name}}`);
        return encodeURIComponent(value);
      });
      const query = new URLSearchParams();
      const parameters = [
        ...((document.paths[path] as { parameters?: unknown[] }).parameters ?? []),
        ...((operation as { parameters?: unknown[] }).parameters ?? []),
      ];
      for (const p of parameters) {
        const parameter = resolve(document, p) as { in: string; name: string; required?: boolean };
        if (parameter.in === "query" && parameter.required) {
          query.set(parameter.name, values[`query:${parameter.name}`] ?? (values[parameter.name] as string));
        }
      }
      const open = Array.isArray(operation.security) && operation.security.length === 0;
      const res = await fetch(`${t.url}${target}${query.size > 0 ? `?${query}` : ""}`, {
        method: method.toUpperCase(),
        headers: open ? {} : { Authorization: `Bearer ${token}` },
        redirect: "manual",
      });
      const body = method === "head" ? "" : await res.text();
      expect(body).not.toMatch(/^no such endpoint/);
      expect([404, 405, 501].includes(res.status) && body.startsWith("method"), body).toBe(false);
      expect(Object.keys(operation.responses), `${res.status} ${body}`).toContain(String(res.status));
      // A read of the fixtures succeeds; a write without a body is refused with its documented 4xx.
      if (method === "get" || method === "head") expect(res.status, body).toBeLessThan(400);
    },
  );
});

/** A parameter or other object, following a local $ref. */
function resolve(document: unknown, value: unknown): unknown {
  const ref = (value as { $ref?: string }).$ref;
  if (ref === undefined) return value;
  return ref
    .slice(2)
    .split("/")
    .reduce(
      (node: unknown, key) => (node as Record<string, unknown>)[key.replace(/~1/g, "/").replace(/~0/g, "~")],
      document,
    );
}
