// The request log and the request metrics, now called from one `finish` and one `close` listener
// shared by every response, with the request id written with the response's head (issue 14, the
// per-request cost of the pipeline): each request is still logged once with its id, status,
// caller and time, and counted once; a poll whose client goes away is released and counted as
// aborted, and leaves nothing in flight.

import * as http2 from "node:http2";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

interface LogLine {
  msg: string;
  req?: string;
  method?: string;
  url?: string;
  status?: number;
  caller?: string;
  ms?: number;
}

async function startLogged(): Promise<{ t: TestServer; lines: LogLine[] }> {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n")) if (line) lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  const server = await startServer({ logger: pino({ level: "info" }, sink), pollWait: 60_000 });
  return { t: server, lines };
}

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** One series of a Prometheus text answer, 0 when absent; `labels` in the order the server writes them. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const series = `${name}{${Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",")}} `;
  const line = text.split("\n").find((l) => l.startsWith(series));
  return line === undefined ? 0 : Number(line.slice(series.length));
}

async function scrape(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

function h2Get(url: string, path: string): Promise<{ status: number; id: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const stream = session.request({ ":path": path });
    let body = "";
    let status = 0;
    let id: string | undefined;
    stream.on("response", (headers) => {
      status = Number(headers[":status"]);
      id = headers["x-request-id"] as string | undefined;
    });
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      body += chunk;
    });
    stream.on("end", () => {
      session.close();
      resolve({ status, id, body });
    });
    stream.on("error", reject);
    stream.end();
  });
}

describe("request log and metrics (issue 14: one finish and one close listener per response)", () => {
  it("every answered request, over HTTP/1.1 and HTTP/2, has an X-Request-Id and exactly one log line with that id, its status, caller and time, and is counted once", async () => {
    const started = await startLogged();
    t = started.t;
    const { url } = t;
    const before = await scrape(url);
    const answers: Array<{ id: string | null | undefined; status: number; method: string; url: string }> = [];
    const record = async (method: string, path: string, init: RequestInit = {}) => {
      const res = await fetch(`${url}${path}`, { method, ...init });
      await res.arrayBuffer();
      answers.push({ id: res.headers.get("x-request-id"), status: res.status, method, url: path });
      return res;
    };
    await record("GET", "/resources/v2/data/home/absent.txt");
    await record("PUT", "/resources/v2/data/home/observed.txt", { body: "x" });
    await record("GET", "/resources/v2/data/home/observed.txt");
    await record("GET", "/resources/v2/nowhere");
    // A status poll, then a poll that waits and answers 204 at its deadline.
    const status = await fetch(`${url}/resources/v2/poll`);
    const cursor = /^RESET home (\d+)$/m.exec(await status.text())?.[1];
    answers.push({
      id: status.headers.get("x-request-id"),
      status: status.status,
      method: "GET",
      url: "/resources/v2/poll",
    });
    await record("GET", `/resources/v2/poll?store=home:${cursor}&wait=0.2`);
    // The client's own request id is kept and echoed.
    const own = await fetch(`${url}/resources/v2/data/home/observed.txt`, {
      headers: { "X-Request-Id": "client-7f3a" },
    });
    await own.arrayBuffer();
    answers.push({
      id: own.headers.get("x-request-id"),
      status: own.status,
      method: "GET",
      url: "/resources/v2/data/home/observed.txt",
    });
    expect(own.headers.get("x-request-id")).toBe("client-7f3a");
    const h2 = await h2Get(url, "/resources/v2/data/home/observed.txt");
    expect(h2).toMatchObject({ status: 200, body: "x" });
    answers.push({ id: h2.id, status: h2.status, method: "GET", url: "/resources/v2/data/home/observed.txt" });

    const checked = answers;
    expect(checked.map((a) => a.status)).toEqual([404, 201, 200, 404, 200, 204, 200, 200]);
    const ids = checked.map((a) => a.id);
    for (const id of ids) expect(id).toMatch(/^[\w-]+$/);
    expect(new Set(ids).size).toBe(ids.length);
    await until(() => started.lines.filter((l) => l.msg === "request").length >= answers.length, "the log lines");
    for (const a of checked) {
      const mine = started.lines.filter((l) => l.msg === "request" && l.req === a.id);
      expect(mine).toHaveLength(1);
      expect(mine[0]).toMatchObject({ method: a.method, url: a.url, status: a.status, caller: "anonymous" });
      expect(typeof mine[0]?.ms).toBe("number");
    }
    // Counted once each (the scrapes themselves are counted under "other").
    const after = await scrape(url);
    const counted = (route: string, status: string) =>
      sample(after, "trove_requests_total", { face: "rest", route, status }) -
      sample(before, "trove_requests_total", { face: "rest", route, status });
    expect(counted("GET /resources/v2/data/{store}/{path}", "404")).toBe(1);
    expect(counted("PUT /resources/v2/data/{store}/{path}", "201")).toBe(1);
    expect(counted("GET /resources/v2/data/{store}/{path}", "200")).toBe(3);
    expect(counted("GET /resources/v2/poll", "204")).toBe(1);
    expect(counted("GET /resources/v2/poll", "200")).toBe(1);
    expect(sample(after, "trove_requests_in_flight", { face: "rest" })).toBe(0);
  }, 60_000);

  it("a parked poll whose client goes away is released, counted once as aborted, and leaves nothing in flight", async () => {
    const started = await startLogged();
    t = started.t;
    const { url, server } = t;
    const cursor = /^RESET home (\d+)$/m.exec(await (await fetch(`${url}/resources/v2/poll`)).text())?.[1];
    const controller = new AbortController();
    const poll = fetch(`${url}/resources/v2/poll?store=home:${cursor}&wait=60`, { signal: controller.signal }).catch(
      (err: Error) => err.name,
    );
    await until(() => server.notifier.waiterCount === 1, "the parked poll");
    const parked = await scrape(url);
    expect(sample(parked, "trove_requests_in_flight", { face: "rest" })).toBe(1);
    controller.abort();
    expect(await poll).toBe("AbortError");
    await until(() => server.notifier.waiterCount === 0, "the waiter to be released");
    expect(server.notifier.timerCount).toBe(0);
    let last = "";
    await until(async () => {
      last = await scrape(url);
      return sample(last, "trove_requests_in_flight", { face: "rest" }) === 0;
    }, "the aborted poll to leave the in-flight gauge");
    expect(
      sample(last, "trove_requests_total", { face: "rest", route: "GET /resources/v2/poll", status: "aborted" }),
    ).toBe(1);
    expect(sample(last, "trove_requests_in_flight", { face: "rest" })).toBe(0);
    // A change after the client left answers no one and breaks nothing: the next poll gets it.
    expect((await fetch(`${url}/resources/v2/data/home/after.txt`, { method: "PUT", body: "y" })).status).toBe(201);
    const next = await fetch(`${url}/resources/v2/poll?store=home:${cursor}&wait=5`);
    expect(next.status).toBe(200);
    expect(await next.text()).toContain("idr://home/after.txt|modify");
  }, 60_000);
});
