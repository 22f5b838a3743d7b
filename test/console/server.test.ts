// GET /console/...: the console's files as a browser gets them, without a token, from a real
// server: types, caching (hashed assets immutable, index.html no-cache), the Content-Security-Policy,
// gzip, client-side routes, and no way out of the folder.

import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevIssuer, openDevIssuer } from "../../src/auth/dev-issuer.js";
import { startServer, type TestServer } from "../support/server.js";

const INDEX =
  '<!doctype html><html><head><script type="module" src="/console/assets/index-Ab12Cd34.js"></script></head></html>\n';
const SCRIPT = `console.log(${JSON.stringify("x".repeat(4000))});\n`;
const POLICY =
  "default-src 'self'; connect-src 'self'; img-src 'self' data: blob:; style-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** A raw HTTP/1.1 GET, so the target reaches the server exactly as written (no URL normalisation). */
function rawGet(port: number, target: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: target, method: "GET" }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the console's files (src/server/console.ts)", () => {
  let root: string;
  let dataDir: string;
  let issuer: DevIssuer;
  let t: TestServer;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "trove-console-files-"));
    await mkdir(join(root, "assets"));
    await writeFile(join(root, "index.html"), INDEX);
    await writeFile(join(root, "assets", "index-Ab12Cd34.js"), SCRIPT);
    await writeFile(join(root, "assets", "index-Ef56Gh78.css"), "body{margin:0}\n");
    dataDir = await mkdtemp(join(tmpdir(), "trove-console-issuer-"));
    issuer = await openDevIssuer({ dataDir });
    // Tokens are required everywhere else: the console's files are open.
    t = await startServer({ auth: issuer.authenticator, devIssuer: issuer, console: { root, clientId: "my-console" } });
  });
  afterAll(async () => {
    await t.stop();
    await rm(root, { recursive: true, force: true });
    await rm(dataDir, { recursive: true, force: true });
  });

  it("GET / and GET /console redirect to /console/, without a token", async () => {
    for (const path of ["/", "/console"]) {
      const res = await fetch(`${t.url}${path}`, { redirect: "manual" });
      expect(res.status).toBe(302);
      expect(res.headers.get("location")).toBe("/console/");
    }
  });

  it("index.html: HTML, no-cache, the strict policy and nosniff", async () => {
    const res = await fetch(`${t.url}/console/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("content-security-policy")).toBe(POLICY);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await res.text()).toBe(INDEX);
  });

  it("a hashed asset is cached for a year, immutable, and sent gzipped to a client that accepts it", async () => {
    const plain = await fetch(`${t.url}/console/assets/index-Ab12Cd34.js`, {
      headers: { "Accept-Encoding": "identity" },
    });
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(plain.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(await plain.text()).toBe(SCRIPT);

    const gz = await rawBytes(t.port, "/console/assets/index-Ab12Cd34.js", { "Accept-Encoding": "gzip, br" });
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(gz.headers.vary).toBe("Accept-Encoding");
    expect(gunzipSync(gz.body).toString("utf8")).toBe(SCRIPT);

    const css = await fetch(`${t.url}/console/assets/index-Ef56Gh78.css`);
    expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8");
  });

  it("If-None-Match with the ETag answers 304", async () => {
    const first = await fetch(`${t.url}/console/assets/index-Ef56Gh78.css`);
    const etag = first.headers.get("etag") as string;
    expect(etag).toMatch(/^"[\w-]+"$/);
    const again = await fetch(`${t.url}/console/assets/index-Ef56Gh78.css`, { headers: { "If-None-Match": etag } });
    expect(again.status).toBe(304);
  });

  it("a client-side route serves index.html; a missing file is 404", async () => {
    const route = await fetch(`${t.url}/console/browse/home/a/b`);
    expect(route.status).toBe(200);
    expect(route.headers.get("cache-control")).toBe("no-cache");
    expect(await route.text()).toBe(INDEX);
    const missing = await fetch(`${t.url}/console/assets/index-00000000.js`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toBe("text/plain; charset=utf-8");
  });

  it("config.json tells the console its client id and issuer, never cached", async () => {
    const res = await fetch(`${t.url}/console/config.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await res.json()).toEqual({ clientId: "my-console", issuer: null, devIssuer: true });
  });

  it("no path leads out of the console's folder", async () => {
    for (const target of [
      "/console/../package.json",
      "/console/..%2f..%2fpackage.json",
      "/console/%2e%2e/%2e%2e/package.json",
      "/console/assets/../../../package.json",
      "/console/..%5c..%5cpackage.json",
    ]) {
      const res = await rawGet(t.port, target);
      expect(res.status, target).toBe(404);
      expect(res.body, target).not.toContain('"name"');
    }
    // A name with no extension is a client-side route: index.html, never the file of that name.
    const route = await rawGet(t.port, "/console/%2fetc%2fpasswd");
    expect(route).toEqual({ status: 200, body: INDEX });
    const bad = await rawGet(t.port, "/console/%E0%A4%A");
    expect(bad.status).toBe(400);
  });

  it("other methods are 405 with Allow: GET, HEAD; HEAD has the headers and no body", async () => {
    const post = await fetch(`${t.url}/console/`, { method: "POST", body: "x" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    const head = await fetch(`${t.url}/console/`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(String(Buffer.byteLength(INDEX)));
    expect(await head.text()).toBe("");
  });

  it("the APIs still need a token", async () => {
    expect((await fetch(`${t.url}/resources/v2/stores`)).status).toBe(401);
  });
});

describe("the console without a build, and with an external issuer", () => {
  it("says how to build it (404), and lets the console reach the issuer's origin only", async () => {
    const empty = await mkdtemp(join(tmpdir(), "trove-console-empty-"));
    const t = await startServer({ console: { root: empty, clientId: "c", issuer: "https://id.example.com/realms/x" } });
    try {
      const res = await fetch(`${t.url}/console/`);
      expect(res.status).toBe(404);
      expect(await res.text()).toContain("npm run build:console");
      const config = await fetch(`${t.url}/console/config.json`);
      expect(await config.json()).toEqual({
        clientId: "c",
        issuer: "https://id.example.com/realms/x",
        devIssuer: false,
      });
      expect(config.headers.get("content-security-policy")).toContain("connect-src 'self' https://id.example.com;");
    } finally {
      await t.stop();
      await rm(empty, { recursive: true, force: true });
    }
  });
});

function rawBytes(
  port: number,
  target: string,
  headers: Record<string, string>,
): Promise<{ headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: target, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("--console-client-id", () => {
  it("flag, then TROVE_CONSOLE_CLIENT_ID, then trove-console; empty is refused", async () => {
    const { parseServeArgs, SERVE_HELP } = await import("../../src/server/config.js");
    const id = (args: string[], env: NodeJS.ProcessEnv = {}) =>
      (parseServeArgs(args, env) as { consoleClientId: string }).consoleClientId;
    expect(id([])).toBe("trove-console");
    expect(id([], { TROVE_CONSOLE_CLIENT_ID: "from-env" })).toBe("from-env");
    expect(id(["--console-client-id", "from-flag"], { TROVE_CONSOLE_CLIENT_ID: "from-env" })).toBe("from-flag");
    expect(() => id(["--console-client-id", ""])).toThrow("console-client-id must not be empty");
    expect(SERVE_HELP).toContain("--console-client-id ID");
  });
});
