// REST v2 conformance: what a resource path may hold (spec: Endpoints > Resources, Errors 400).
// fetch (WHATWG URL) normalizes "." and ".." segments, also percent-encoded ones: those
// targets are sent byte for byte with node:http.

import * as net from "node:net";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import {
  bytes,
  DATA,
  expectError,
  listingEntries,
  putDirectory,
  type RestClient,
  restClient,
  SERVER,
  storeState,
} from "./rest-client.js";

let server: TestServer;
let client: RestClient;

beforeEach(async () => {
  server = await startServer();
  client = restClient(server);
  await putDirectory(client, "docs/");
});

afterEach(async () => {
  await server.stop();
});

const DOT_SEGMENT = (s: string) => `path segment ${JSON.stringify(s)} is not allowed`;
const CONTROL = "path contains a control character";
const MALFORMED = (s: string) => `malformed percent-encoding in ${JSON.stringify(s)}`;
const long = (n: number) => "n".repeat(n);
// 17 segments of 250 bytes: every name is short enough, the path (4266 bytes) is not.
const LONG_PATH = Array.from({ length: 17 }, (_, i) => `${i}`.padEnd(250, "p")).join("/");

/**
 * Paths that are refused with 400, whatever the method, and the reason given.
 * Each is sent raw: what the server receives is exactly what is written here.
 */
const REFUSED: Array<[string, string, string]> = [
  [". segment", "docs/./a.txt", DOT_SEGMENT(".")],
  [".. segment", "docs/../a.txt", DOT_SEGMENT("..")],
  [".. segment climbing out of the store", "../home/a.txt", DOT_SEGMENT("..")],
  ["trailing .. segment", "docs/..", DOT_SEGMENT("..")],
  ["percent-encoded .. (%2e%2e)", "docs/%2e%2e/a.txt", DOT_SEGMENT("..")],
  ["percent-encoded .. (%2E%2E)", "docs/%2E%2E/a.txt", DOT_SEGMENT("..")],
  ["half-encoded .. (.%2e)", "docs/.%2e/a.txt", DOT_SEGMENT("..")],
  ["percent-encoded . (%2e)", "docs/%2e/a.txt", DOT_SEGMENT(".")],
  ["empty segment (a//b)", "docs//a.txt", "empty path segment (double slash)"],
  ["empty segment after the store", "/a.txt", "empty path segment (double slash)"],
  ["NUL (%00)", "docs/a%00b.txt", CONTROL],
  ["control character %01", "docs/a%01b.txt", CONTROL],
  ["line feed %0A", "docs/a%0Ab.txt", CONTROL],
  ["DEL %7F", "docs/a%7Fb.txt", CONTROL],
  ["C1 control U+0085 (%C2%85)", "docs/a%C2%85b.txt", CONTROL],
  ["encoded slash %2F in a name", "docs/a%2Fb.txt", "a name cannot contain '/'"],
  ["encoded slash %2f in a name", "docs%2fa.txt", "a name cannot contain '/'"],
  ["name over 255 bytes", `docs/${long(256)}`, "name longer than 255 bytes"],
  ["name over 255 bytes in UTF-8 (128 × é)", `docs/${"%C3%A9".repeat(128)}`, "name longer than 255 bytes"],
  ["path over 4096 bytes", LONG_PATH, "path longer than 4096 bytes"],
  [
    "U+FFFF, not an XML character (%EF%BF%BF)",
    "docs/a%EF%BF%BF.txt",
    "path contains U+FFFE or U+FFFF, which XML cannot carry",
  ],
  [
    "U+FFFE, not an XML character (%EF%BF%BE)",
    "docs/a%EF%BF%BE.txt",
    "path contains U+FFFE or U+FFFF, which XML cannot carry",
  ],
  ["bad percent-encoding (%zz)", "docs/a%zz.txt", MALFORMED("a%zz.txt")],
  ["truncated percent-encoding (%4)", "docs/a%4", MALFORMED("a%4")],
  ["percent-encoded invalid UTF-8 (%FF)", "docs/a%FF.txt", MALFORMED("a%FF.txt")],
  ["percent-encoded lone surrogate (%ED%A0%80)", "docs/a%ED%A0%80.txt", MALFORMED("a%ED%A0%80.txt")],
];

describe("refused paths", () => {
  test.each(REFUSED)("PUT resource with %s -> 400 text/plain reason, nothing stored", async (_, path, reason) => {
    const before = await storeState(client);
    const reply = await client.raw("PUT", `${DATA}/home/${path}`, { body: "contents" });
    expectError(reply, 400, reason);
    expect(await storeState(client)).toEqual(before);
  });

  test.each(REFUSED)("PUT directory with %s -> 400 text/plain reason, nothing stored", async (_, path, reason) => {
    const before = await storeState(client);
    expectError(await client.raw("PUT", `${DATA}/home/${path}/`), 400, reason);
    expect(await storeState(client)).toEqual(before);
  });

  test.each(REFUSED)("GET, HEAD and DELETE with %s -> 400, nothing deleted", async (_, path, reason) => {
    const before = await storeState(client);
    expectError(await client.raw("GET", `${DATA}/home/${path}`), 400, reason);
    const head = await client.raw("HEAD", `${DATA}/home/${path}`);
    expect(head.status).toBe(400);
    expect(head.text).toBe("");
    expectError(await client.raw("DELETE", `${DATA}/home/${path}`), 400, reason);
    expect(await storeState(client)).toEqual(before);
  });

  test("a .. segment in place of the store name -> 400, never another endpoint", async () => {
    const before = await storeState(client);
    const stores = await client.fetch("GET", "/resources/v2/stores");
    for (const target of [`${DATA}/../stores`, `${DATA}/%2e%2e/stores`, `${DATA}/home/../../stores`]) {
      const reply = await client.raw("GET", target);
      expectError(reply, 400, /^(invalid store name "\.\.".*|path segment "\.\." is not allowed)\n$/);
    }
    expectError(await client.raw("PUT", `${DATA}/../home/a.txt`, { body: "x" }), 400, /^invalid store name "\.\."/);
    expect(await storeState(client)).toEqual(before);
    expect((await client.fetch("GET", "/resources/v2/stores")).text).toBe(stores.text);
  });

  test("a name of exactly 255 bytes and a path of exactly 4096 bytes are accepted", async () => {
    const name = long(255);
    const put = await client.fetch("PUT", `${DATA}/home/docs/${name}`, { body: bytes("x") });
    expect(put.status).toBe(201);
    expect(listingEntries((await client.fetch("GET", `${DATA}/home/docs/`)).text).map((e) => e.name)).toEqual([name]);
    // 17 names and 16 slashes: 15 × 255 + 200 + 55 + 16 = 4096 bytes; one more byte is too long.
    const path = (last: number) => [...Array.from({ length: 15 }, () => long(255)), long(200), long(last)].join("/");
    expect(Buffer.byteLength(path(55))).toBe(4096);
    expectError(await client.raw("GET", `${DATA}/home/${path(56)}`), 400, "path longer than 4096 bytes");
    // Valid at 4096 bytes, only absent.
    expectError(await client.raw("GET", `${DATA}/home/${path(55)}`), 404, `/${path(55)} not found in store home`);
  });

  test("a raw control character in the request target, refused by Node's parser, still answers 400 with Server and a text/plain reason", async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(server.port, "127.0.0.1", () => {
        socket.write(`GET ${DATA}/home/a\u0001b.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
      });
      let data = "";
      socket.setEncoding("latin1");
      socket.on("data", (chunk: string) => {
        data += chunk;
      });
      socket.on("end", () => resolve(data));
      socket.on("error", reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain(`\r\nServer: ${SERVER}\r\n`);
    expect(answer).toMatch(/\r\nContent-Type: text\/plain/i);
  });
});

describe("Unicode and special characters in names", () => {
  test("Unicode names (Prüfung/日本語 ✓.txt) work end to end: PUT, GET, listing shows the decoded name", async () => {
    const dir = "Prüfung";
    const file = "日本語 ✓.txt";
    const encoded = `${encodeURIComponent(dir)}/${encodeURIComponent(file)}`;
    const mkdir = await client.fetch("PUT", `${DATA}/home/${encodeURIComponent(dir)}/`);
    expect(mkdir.status).toBe(201);
    const put = await client.fetch("PUT", `${DATA}/home/${encoded}`, { body: bytes("ünïcødé ✓") });
    expect(put.status).toBe(201);
    expect(put.headers.get("location")).toBe(`${DATA}/home/${encoded}`);
    const get = await client.fetch("GET", `${DATA}/home/${encoded}`);
    expect(get.status).toBe(200);
    expect(get.text).toBe("ünïcødé ✓");
    expect(get.headers.get("etag")).toBe(put.headers.get("etag"));
    expect(get.headers.get("content-type")).toBe("text/plain");
    // fetch percent-encodes a path given as text the same way.
    expect((await client.fetch("GET", `${DATA}/home/${dir}/${file}`)).text).toBe("ünïcødé ✓");
    expect(listingEntries((await client.fetch("GET", `${DATA}/home/`)).text).map((e) => e.name)).toEqual([
      "Prüfung",
      "docs",
    ]);
    const deep = listingEntries(
      (await client.fetch("GET", `${DATA}/home/${encodeURIComponent(dir)}/?recursive=true`)).text,
    );
    expect(deep.map((e) => e.name)).toEqual([file]);
    const redirect = await client.fetch("GET", `${DATA}/home/${encodeURIComponent(dir)}`);
    expect(redirect.status).toBe(303);
    expect(redirect.headers.get("location")).toBe(`${DATA}/home/${encodeURIComponent(dir)}/`);
    expect((await client.fetch("DELETE", `${DATA}/home/${encoded}`)).status).toBe(200);
    expect((await client.fetch("GET", `${DATA}/home/${encoded}`)).text).toBe("deleted");
  });

  test.each([
    ["?", "what?.txt"],
    ["#", "#1.txt"],
    ["%", "100%.txt"],
    ["+ and space", "a + b.txt"],
    [";", "a;b.txt"],
  ])("a name with %s, percent-encoded, round-trips", async (_, name) => {
    const target = `${DATA}/home/docs/${encodeURIComponent(name)}`;
    expect((await client.fetch("PUT", target, { body: bytes(name) })).status).toBe(201);
    expect((await client.fetch("GET", target)).text).toBe(name);
    expect(listingEntries((await client.fetch("GET", `${DATA}/home/docs/`)).text).map((e) => e.name)).toEqual([name]);
  });

  test("names with noncharacters XML allows (U+FDD0, U+10FFFF) are stored and listed, recursively from the root too", async () => {
    for (const name of ["a\uFDD0.txt", "\u{10FFFF}.txt", "\u{10FFFF}"]) {
      expect(
        (await client.fetch("PUT", `${DATA}/home/${encodeURIComponent(name)}`, { body: bytes(name) })).status,
      ).toBe(201);
    }
    expect((await client.fetch("PUT", `${DATA}/home/${encodeURIComponent("\u{10FFFF}")}2/`)).status).toBe(201);
    const flat = listingEntries((await client.fetch("GET", `${DATA}/home/`)).text).map((e) => e.name);
    const deep = listingEntries((await client.fetch("GET", `${DATA}/home/?recursive=true`)).text).map((e) => e.name);
    expect(flat).toEqual(["a\uFDD0.txt", "docs", "\u{10FFFF}", "\u{10FFFF}.txt", "\u{10FFFF}2"]);
    expect(deep).toEqual(flat);
  });

  test("names differing only in case are different resources", async () => {
    expect((await client.fetch("PUT", `${DATA}/home/docs/A.txt`, { body: bytes("upper") })).status).toBe(201);
    expect((await client.fetch("PUT", `${DATA}/home/docs/a.txt`, { body: bytes("lower") })).status).toBe(201);
    expect((await client.fetch("GET", `${DATA}/home/docs/A.txt`)).text).toBe("upper");
    expect((await client.fetch("GET", `${DATA}/home/docs/a.txt`)).text).toBe("lower");
  });
});
