// The console's static files (console/, built by Vite into dist/console/), served without a token
// under /console/: the page is public, the APIs it calls need tokens. Every file is read (and
// gzipped) once into memory at the first request for the console, so a request path is only
// ever a key of that table: nothing outside the folder can be named. Paths that name no file
// serve index.html (client-side routing).

import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { extname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { sendText, splitUrl } from "../rest/http.js";
import { dropUnreadBody } from "../rpc/refusals.js";
import type { OpenRoute } from "./faces.js";

export const CONSOLE_PREFIX = "/console/";
export const CONSOLE_CONFIG_PATH = "/console/config.json";

/** dist/console/, from src/server/ and from dist/server/ alike. */
export const CONSOLE_DIR = fileURLToPath(new URL("../../dist/console/", import.meta.url));

export interface ConsoleOptions {
  /** The built console (default dist/console/). */
  root?: string;
  /** Public OAuth client id the console signs in with. */
  clientId: string;
  /** The configured external issuer; absent in development mode (the embedded issuer under /auth/). */
  issuer?: string;
}

interface ConsoleFile {
  body: Buffer;
  gzip?: Buffer;
  type: string;
  etag: string;
  /** Content-hashed by the build (assets/name-HASH.ext): cached for a year. */
  immutable: boolean;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

/** Only text compresses; a file under 1 KiB is sent as it is. */
const COMPRESSIBLE = new Set([".html", ".js", ".mjs", ".css", ".json", ".map", ".svg", ".txt"]);

/**
 * The Content-Security-Policy of every console response: nothing from other origins, no inline
 * script or style. An external issuer's origin is the one exception, for its token endpoint.
 */
export function consolePolicy(issuer?: string): string {
  const connect = issuer ? `'self' ${new URL(issuer).origin}` : "'self'";
  return [
    "default-src 'self'",
    `connect-src ${connect}`,
    "img-src 'self' data: blob:",
    "style-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ].join("; ");
}

function load(root: string): Map<string, ConsoleFile> | undefined {
  let names: string[];
  try {
    if (!statSync(join(root, "index.html")).isFile()) return undefined;
    names = readdirSync(root, { recursive: true, encoding: "utf8" });
  } catch {
    return undefined;
  }
  const files = new Map<string, ConsoleFile>();
  for (const name of names) {
    const path = join(root, name);
    if (!statSync(path).isFile()) continue;
    const body = readFileSync(path);
    const ext = extname(name).toLowerCase();
    const key = relative(root, path).split(sep).join("/");
    files.set(key, {
      body,
      gzip: COMPRESSIBLE.has(ext) && body.byteLength >= 1024 ? gzipSync(body, { level: 9 }) : undefined,
      type: TYPES[ext] ?? "application/octet-stream",
      etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`,
      immutable: key.startsWith("assets/"),
    });
  }
  return files;
}

/** The file a path below /console/ names: a file of the build, index.html for a client-side route, or none. */
export function consoleFileKey(rest: string, has: (key: string) => boolean): string | undefined {
  if (rest === "") return "index.html";
  if (has(rest)) return rest;
  // A path whose last segment looks like a file name (assets/x.js) is a missing file, not a route.
  const last = rest.slice(rest.lastIndexOf("/") + 1);
  return last.includes(".") ? undefined : "index.html";
}

function acceptsGzip(header: string | string[] | undefined): boolean {
  const value = Array.isArray(header) ? header.join(",") : (header ?? "");
  return value.split(",").some((part) => {
    const [coding, ...params] = part.split(";").map((p) => p.trim().toLowerCase());
    const q = params.find((p) => p.startsWith("q="));
    return coding === "gzip" && (q === undefined || Number(q.slice(2)) > 0);
  });
}

/** The open routes of the console: `/` and `/console` redirect to `/console/`, the tree below it. */
export function consoleRoutes(options: ConsoleOptions): { routes: Array<[string, OpenRoute]>; tree: OpenRoute } {
  const root = options.root ?? CONSOLE_DIR;
  const policy = consolePolicy(options.issuer);
  // Read (and gzipped) at the first request for it, not at start-up: most servers, and every test
  // server, never serve it.
  let files: Map<string, ConsoleFile> | undefined;
  const config = Buffer.from(
    `${JSON.stringify({ clientId: options.clientId, issuer: options.issuer ?? null, devIssuer: !options.issuer })}\n`,
  );
  const common = (r: ServerResponse) => {
    r.setHeader("Content-Security-Policy", policy);
    r.setHeader("X-Content-Type-Options", "nosniff");
    r.setHeader("Referrer-Policy", "no-referrer");
  };
  const readOnly = (req: Parameters<OpenRoute>[0], res: Parameters<OpenRoute>[1], path: string): boolean => {
    if (req.method === "GET" || req.method === "HEAD") return true;
    dropUnreadBody(req, res);
    sendText(res, 405, `method ${req.method} not allowed on ${path}`, { Allow: "GET, HEAD" });
    return false;
  };
  const redirect =
    (path: string): OpenRoute =>
    (req, res) => {
      if (!readOnly(req, res, path)) return;
      const r = res as ServerResponse;
      r.statusCode = 302;
      r.setHeader("Location", CONSOLE_PREFIX);
      r.setHeader("Content-Length", 0);
      r.end();
    };

  const tree: OpenRoute = (req, res) => {
    const { pathname } = splitUrl(req.url ?? "/");
    if (!readOnly(req, res, pathname)) return;
    const r = res as ServerResponse;
    common(r);
    if (pathname === CONSOLE_CONFIG_PATH) {
      r.statusCode = 200;
      r.setHeader("Content-Type", "application/json");
      r.setHeader("Cache-Control", "no-store");
      r.setHeader("Content-Length", config.byteLength);
      r.end(req.method === "HEAD" ? undefined : config);
      return;
    }
    // Built after the server started (npm run build:console): picked up at the next request.
    files ??= load(root);
    if (!files) {
      sendText(res, 404, "the console is not built: run npm run build:console (npm install does it)");
      return;
    }
    let rest: string;
    try {
      rest = decodeURIComponent(pathname.slice(CONSOLE_PREFIX.length));
    } catch {
      sendText(res, 400, `not a valid path: ${pathname}`);
      return;
    }
    const table = files;
    const key = consoleFileKey(rest, (k) => table.has(k));
    const file = key === undefined ? undefined : table.get(key);
    if (!file) {
      sendText(res, 404, `no such file: ${pathname}`);
      return;
    }
    r.setHeader("Cache-Control", file.immutable ? "public, max-age=31536000, immutable" : "no-cache");
    r.setHeader("ETag", file.etag);
    r.setHeader("Vary", "Accept-Encoding");
    if (req.headers["if-none-match"] === file.etag) {
      r.statusCode = 304;
      r.end();
      return;
    }
    const gzip = file.gzip && acceptsGzip(req.headers["accept-encoding"]);
    const body = gzip ? (file.gzip as Buffer) : file.body;
    r.statusCode = 200;
    r.setHeader("Content-Type", file.type);
    if (gzip) r.setHeader("Content-Encoding", "gzip");
    r.setHeader("Content-Length", body.byteLength);
    r.end(req.method === "HEAD" ? undefined : body);
  };

  return {
    routes: [
      ["/", redirect("/")],
      ["/console", redirect("/console")],
    ],
    tree,
  };
}
