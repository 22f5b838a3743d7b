// A REST v2 client for the conformance suite: every reply is checked for the
// spec's `Server: resources/1.0` header, whatever its status.

import { request as httpRequest } from "node:http";
import { XMLParser } from "fast-xml-parser";
import { expect } from "vitest";
import type { TestServer } from "../support/server.js";

export const SERVER = "resources/1.0";
export const DATA = "/resources/v2/data";
export const STORES = "/resources/v2/stores";
export const TEXT = "text/plain; charset=utf-8";
export const XML = "application/xml; charset=utf-8";

export interface Reply {
  status: number;
  headers: Headers;
  /** The body as UTF-8 text. */
  text: string;
  bytes: Buffer;
}

export interface RequestInit {
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

function checked(reply: Reply): Reply {
  expect(reply.headers.get("server"), `Server header of a ${reply.status} answer`).toBe(SERVER);
  return reply;
}

export interface RestClient {
  /** A request through fetch (undici, HTTP/1.1); `target` is the path and query, e.g. `/resources/v2/stores`. */
  fetch(method: string, target: string, init?: RequestInit): Promise<Reply>;
  /** A request with the target sent byte for byte, for paths that fetch would normalize (`..`, `%2e`). */
  raw(method: string, target: string, init?: RequestInit): Promise<Reply>;
}

export function restClient(server: Pick<TestServer, "url" | "port">): RestClient {
  return {
    async fetch(method, target, init = {}) {
      const res = await fetch(`${server.url}${target}`, {
        method,
        headers: init.headers,
        body: init.body,
        redirect: "manual",
      });
      const bytes = Buffer.from(await res.arrayBuffer());
      return checked({ status: res.status, headers: res.headers, text: bytes.toString("utf8"), bytes });
    },
    raw(method, target, init = {}) {
      return new Promise((resolve, reject) => {
        const req = httpRequest(
          { host: "127.0.0.1", port: server.port, path: target, method, headers: init.headers, agent: false },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("error", reject);
            res.on("end", () => {
              const headers = new Headers();
              for (const [name, value] of Object.entries(res.headers)) {
                if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
              }
              const bytes = Buffer.concat(chunks);
              resolve(checked({ status: res.statusCode ?? 0, headers, text: bytes.toString("utf8"), bytes }));
            });
          },
        );
        req.on("error", reject);
        req.end(init.body);
      });
    },
  };
}

/** A clock the server reads through `startServer({ now })`; tests move it by hand. */
export interface TestClock {
  now(): number;
  advance(millis: number): void;
}

export function testClock(start = Date.UTC(2024, 0, 15, 10, 30, 0, 250)): TestClock {
  let t = start;
  return {
    now: () => t,
    advance(millis) {
      t += millis;
    },
  };
}

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "",
  parseAttributeValue: false,
  parseTagValue: false,
  isArray: (name) => ["resource", "store", "feature", "setting"].includes(name),
});

export function parseXml(xml: string): Record<string, unknown> {
  return parser.parse(xml) as Record<string, unknown>;
}

/** The attributes of each `version` element of `GET {url}` (a `?versions=true` read), newest first. */
export async function versionElements(client: RestClient, url: string): Promise<Array<Record<string, string>>> {
  const reply = await client.fetch("GET", url);
  expect(reply.status, reply.text).toBe(200);
  expect(reply.headers.get("content-type")).toBe(XML);
  const doc = parseXml(reply.text) as {
    versions: { version?: Record<string, string> | Array<Record<string, string>> };
  };
  const list = doc.versions.version ?? [];
  return Array.isArray(list) ? list : [list];
}

/** The attributes of each `resource` element of a directory listing, in document order. */
export function listingEntries(xml: string): Array<Record<string, string>> {
  const doc = parseXml(xml);
  expect(Object.keys(doc).filter((k) => k !== "?xml")).toEqual(["resources"]);
  const root = doc.resources;
  if (root === "" || root === undefined) return [];
  return ((root as { resource?: Array<Record<string, string>> }).resource ?? []).map((r) => ({ ...r }));
}

/** Body of a resource PUT without a Content-Type of its own (a string body would get text/plain from fetch). */
export function bytes(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

export interface StoreState {
  rootTag: string | null;
  /** Recursive listing with deleted entries and blob ids: every attribute a client can see. */
  listing: string;
}

/** Everything a client can observe about a store's tree, to show that a refused request changed nothing. */
export async function storeState(client: RestClient, store = "home"): Promise<StoreState> {
  const reply = await client.fetch(
    "GET",
    `${DATA}/${store}/?recursive=true&include-deleted=true&include-blob-uuid=true&include-access=true`,
  );
  expect(reply.status).toBe(200);
  return { rootTag: reply.headers.get("etag"), listing: reply.text };
}

/** PUTs a resource and expects it created; returns its ETag. */
export async function putResource(
  client: RestClient,
  path: string,
  body: string,
  headers: Record<string, string> = {},
  store = "home",
): Promise<string> {
  const reply = await client.fetch("PUT", `${DATA}/${store}/${path}`, { body: bytes(body), headers });
  expect(reply.status, `PUT ${path}: ${reply.text}`).toBe(201);
  return reply.headers.get("etag") ?? "";
}

/** PUTs a directory (path ending in /) and expects it created; returns its ETag. */
export async function putDirectory(client: RestClient, path: string, store = "home"): Promise<string> {
  const reply = await client.fetch("PUT", `${DATA}/${store}/${path}`);
  expect(reply.status, `PUT ${path}: ${reply.text}`).toBe(201);
  return reply.headers.get("etag") ?? "";
}

/** Creates a store through POST /resources/v2/stores. */
export async function createStore(
  client: RestClient,
  name: string,
  type: "recursive" | "snapshot",
  settings: Record<string, string> = {},
): Promise<void> {
  const reply = await client.fetch("POST", STORES, {
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name, type, settings }),
  });
  expect(reply.status, reply.text).toBe(201);
}

/** Expects an error answered with a text/plain reason. */
export function expectError(reply: Reply, status: number, reason: string | RegExp): void {
  expect(reply.status).toBe(status);
  expect(reply.headers.get("content-type")).toBe(TEXT);
  if (typeof reason === "string") expect(reply.text).toBe(`${reason}\n`);
  else expect(reply.text).toMatch(reason);
}
