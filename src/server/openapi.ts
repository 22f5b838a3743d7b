// GET /openapi.json: the OpenAPI 3.1 description of the HTTP faces that are not RPC. Its one source
// is docs/openapi.yaml, read and converted to JSON once, when the first server is created.

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { parse } from "yaml";
import { sendText } from "../rest/http.js";
import { dropUnreadBody } from "../rpc/refusals.js";
import type { OpenRoute } from "./faces.js";

export const OPENAPI_PATH = "/openapi.json";

/** docs/openapi.yaml, from src/server/ and from dist/server/ alike. */
export const OPENAPI_SOURCE = new URL("../../docs/openapi.yaml", import.meta.url);

interface ServedDocument {
  body: Buffer;
  etag: string;
}

let served: ServedDocument | undefined;

/** The document as the server serves it: docs/openapi.yaml parsed (the YAML's JSON data model). */
export function openApiDocument(): unknown {
  return parse(readFileSync(OPENAPI_SOURCE, "utf8"));
}

function load(): ServedDocument {
  if (!served) {
    const body = Buffer.from(`${JSON.stringify(openApiDocument())}\n`);
    served = { body, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"` };
  }
  return served;
}

/** The open route of /openapi.json; reading the file now makes a broken document fail the start-up. */
export function openApiRoute(): OpenRoute {
  const { body, etag } = load();
  return (req, res) => {
    const r = res as ServerResponse;
    if (req.method !== "GET" && req.method !== "HEAD") {
      dropUnreadBody(req, res);
      sendText(res, 405, `method ${req.method} not allowed on ${OPENAPI_PATH}`, { Allow: "GET, HEAD" });
      return;
    }
    r.setHeader("ETag", etag);
    r.setHeader("Cache-Control", "no-cache");
    if (req.headers["if-none-match"] === etag) {
      r.statusCode = 304;
      r.end();
      return;
    }
    r.statusCode = 200;
    r.setHeader("Content-Type", "application/json");
    r.setHeader("Content-Length", body.byteLength);
    r.end(req.method === "HEAD" ? undefined : body);
  };
}
