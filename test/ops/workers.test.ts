// `trove serve --workers N` (issue 14, multi-core serving; docs/operations.md, "Several cores"), as
// clients and an operator see it: the server runs in a child process (from dist/) with two worker
// processes on one port. Which worker holds a connection is read from /proc, never from the
// server: the test keeps keep-alive connections and finds the worker process that owns the
// server's end of each (its socket inode in /proc/net/tcp, among the fds of the primary's
// children). So "on the other worker" is a fact the test checks, not a hope about round robin.

import { execFile, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import * as http from "node:http";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { decodeJwt } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type ChildServer, freePort, startChildServer } from "../support/child-server.js";
import {
  type Answer,
  alive,
  auth,
  type Change,
  changesOf,
  children,
  cleanUp,
  createStore,
  dirs,
  lastEventId,
  metricSum,
  onePerWorker,
  opened,
  ownerOf,
  Pinned,
  parked,
  pin,
  send,
  servers,
  startWorkers,
  tagOf,
  until,
  WORKERS_ARGS,
  workerPids,
  workers,
} from "../support/workers.js";

const CLI = fileURLToPath(new URL("../../bin/trove.js", import.meta.url));

/**
 * A PUT on `c` whose body the test sends in parts: `started` settles once the worker has taken the
 * request (its 100 Continue), `response` with the answer (or rejects when the connection is cut).
 */
function slowUpload(c: Pinned, path: string, length: number) {
  const req = http.request(`${c.s.url}${path}`, {
    method: "PUT",
    agent: c.agent,
    headers: {
      authorization: c.s.authorization,
      "content-type": "text/plain",
      "content-length": String(length),
      expect: "100-continue",
    },
  });
  const started = new Promise<void>((resolve) => req.once("continue", () => resolve()));
  const response = new Promise<Answer>((resolve, reject) => {
    req.once("response", (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (chunk: string) => {
        body += chunk;
      });
      res.once("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, localPort: 0 }));
      res.once("error", reject);
    });
    req.once("error", reject);
  });
  response.catch(() => {});
  req.flushHeaders();
  return {
    started,
    response,
    write: (chunk: string) => new Promise<void>((resolve) => req.write(chunk, () => resolve())),
    end: (chunk: string) => req.end(chunk),
  };
}

/**
 * Under --max-connections: one connection on each worker, a connection refused (503) being
 * dropped; undefined (to try again) when a worker still refuses after a few tries.
 */
async function pinUnderLimit(s: ChildServer, pids: number[]): Promise<Pinned[] | undefined> {
  const held = new Map<number, Pinned>();
  for (let tries = 0; held.size < pids.length && tries < 8; tries++) {
    const c = new Pinned(s);
    opened.push(c);
    const a = await c.request("/healthz");
    const owner = a.status === 200 ? await ownerOf(s.port, c.localPort, pids) : undefined;
    if (owner !== undefined && !held.has(owner)) {
      c.pid = owner;
      held.set(owner, c);
    } else {
      c.close();
    }
  }
  if (held.size === pids.length) return [...held.values()];
  for (const c of held.values()) c.close();
  return undefined;
}

/** A worker's slot (1..N), from the environment the primary gave it (TROVE_WORKER_SLOT). */
async function slotOf(pid: number): Promise<number> {
  const environ = await readFile(`/proc/${pid}/environ`, "utf8");
  const match = /(?:^|\0)TROVE_WORKER_SLOT=(\d+)(?:\0|$)/.exec(environ);
  if (!match) throw new Error(`process ${pid} has no TROVE_WORKER_SLOT`);
  return Number(match[1]);
}

/** `pids` ordered by slot: [slot 1's, slot 2's, ...]. */
async function bySlot(pids: number[]): Promise<number[]> {
  const slots = await Promise.all(pids.map(async (pid) => [await slotOf(pid), pid] as const));
  return slots.sort((a, b) => a[0] - b[0]).map(([, pid]) => pid);
}

/** A project with one environment holding one resource, made through the REST API. */
async function reportProject(s: ChildServer, name: string): Promise<{ projectID: string; environmentID: string }> {
  const json = auth(s, { "content-type": "application/json" });
  const project = await send(`${s.url}/insights/v1/projects`, {
    method: "POST",
    headers: json,
    body: JSON.stringify({ name }),
  });
  expect(project.status).toBe(201);
  const { id: projectID, store } = JSON.parse(project.body) as { id: string; store: string };
  const env = await send(`${s.url}/insights/v1/projects/${projectID}/environments`, {
    method: "POST",
    headers: json,
    body: '{"name":"draft"}',
  });
  expect(env.status).toBe(201);
  const put = await send(`${s.url}/resources/v2/data/${store}/draft/note.txt`, {
    method: "PUT",
    headers: auth(s, { "content-type": "text/plain" }),
    body: "a note",
  });
  expect(put.status).toBe(201);
  return { projectID, environmentID: (JSON.parse(env.body) as { id: string }).id };
}

/** Requests a report on `on`, then watches it (`wait=`) on `watch` until it is no longer generating. */
async function reportAcross(
  s: ChildServer,
  p: { projectID: string; environmentID: string },
  on: Pinned,
  watch: Pinned,
): Promise<{ id: string; status: Record<string, unknown> }> {
  const created = await on.request("/insights/v1/reports", {
    method: "POST",
    headers: auth(s, { "content-type": "application/json" }),
    body: JSON.stringify(p),
  });
  expect(created.status).toBe(202);
  const id = (JSON.parse(created.body) as { reportID: string[] }).reportID[0] as string;
  for (let i = 0; i < 20; i++) {
    const got = await watch.request(
      `/insights/v1/reports/${id}?projectID=${p.projectID}&environmentID=${p.environmentID}&wait=30`,
      { headers: auth(s) },
    );
    expect(got.status).toBe(200);
    const status = JSON.parse(got.body) as Record<string, unknown>;
    if (status.status !== "generating") return { id, status };
  }
  throw new Error(`report ${id} still generating after 20 waits`);
}

/**
 * Parks a poll of `store` on `pollOn` (and waits until it is parked), runs `meanwhile`, then PUTs
 * `path` on `putOn`: the poll answers 200 with that PUT's CHANGE and its new ETag.
 */
async function pollWakesFor(
  s: ChildServer,
  store: string,
  pollOn: Pinned,
  putOn: Pinned,
  path: string,
  meanwhile?: () => void,
): Promise<void> {
  const cursor = await lastEventId(s, store);
  const waiting = pollOn.request(`/resources/v2/poll?store=${store}:${cursor}&wait=60`, { headers: auth(s) });
  await parked(s, 1);
  meanwhile?.();
  const put = await putOn.request(`/resources/v2/data/${store}/${path}`, {
    method: "PUT",
    headers: auth(s),
    body: path,
  });
  expect(put.status).toBe(201);
  const woke = await waiting;
  expect(woke.status).toBe(200);
  expect(changesOf(store, woke.body).find((c) => c.path === path)?.tag).toBe(tagOf(put));
}

afterEach(cleanUp);

describe("trove serve --workers 2: one data directory, two worker processes (issue 14, multi-core serving)", () => {
  let s: ChildServer;
  let pids: number[];

  beforeAll(async () => {
    ({ s, pids } = await startWorkers());
    // One server for this block: its connections are closed after each test, the server after all.
    servers.splice(servers.indexOf(s), 1);
    for (const pid of pids) workers.delete(pid);
  }, 60_000);
  afterAll(async () => {
    servers.push(s);
    for (const pid of pids) workers.add(pid);
    await cleanUp();
  });

  it("spec Poll: long polls parked in both workers all wake with the CHANGE of a PUT answered by either worker (issue 14, multi-core serving)", async () => {
    await createStore(s, "crossfeed");
    const polls = await pin(s, pids, 3);
    const writers = await onePerWorker(s, pids);
    let cursor = await lastEventId(s, "crossfeed");
    for (const [round, writer] of writers.entries()) {
      const waiting = [...polls.values()]
        .flat()
        .map((c) => c.request(`/resources/v2/poll?store=crossfeed:${cursor}&wait=60`, { headers: auth(s) }));
      await parked(s, 6);
      const put = await writer.request(`/resources/v2/data/crossfeed/round-${round}.txt`, {
        method: "PUT",
        headers: auth(s, { "content-type": "text/plain" }),
        body: `written by worker ${writer.pid}`,
      });
      expect(put.status).toBe(201);
      const answers = await Promise.all(waiting);
      const first = changesOf("crossfeed", answers[0]?.body ?? "");
      expect(first).toEqual([
        {
          id: expect.any(Number),
          path: `round-${round}.txt`,
          op: "modify",
          previous: "",
          tag: tagOf(put),
          type: "text/plain",
        },
      ]);
      expect(first[0]?.id).toBeGreaterThan(cursor);
      // Every poll, in the worker that answered the PUT and in the other: 200 and the same line.
      for (const a of answers) {
        expect(a.status).toBe(200);
        expect(a.headers["content-type"]).toBe("text/plain; charset=utf-8");
        expect(a.body).toBe(answers[0]?.body);
      }
      cursor = first[0]?.id as number;
    }
  }, 120_000);

  it("read-after-write: a GET on the other worker, and on fresh connections, sees the PUT at once; If-None-Match old tag 200, new tag 304 (issue 14, multi-core serving)", async () => {
    await createStore(s, "readafter", "recursive");
    const [a, b] = (await onePerWorker(s, pids)) as [Pinned, Pinned];
    let old = "";
    for (let round = 0; round < 6; round++) {
      const [writer, reader] = round % 2 === 0 ? [a, b] : [b, a];
      const body = `round ${round} from worker ${writer.pid} ${randomBytes(8).toString("hex")}`;
      const put = await writer.request("/resources/v2/data/readafter/doc.txt", {
        method: "PUT",
        headers: auth(s, { "content-type": "text/plain" }),
        body,
      });
      expect(put.status).toBe(round === 0 ? 201 : 200);
      const tag = tagOf(put);
      expect(tag).not.toBe(old);
      const url = `${s.url}/resources/v2/data/readafter/doc.txt`;
      const reads: Array<(headers: Record<string, string>) => Promise<Answer>> = [
        (headers) => reader.request("/resources/v2/data/readafter/doc.txt", { headers }),
        ...Array.from({ length: 4 }, () => (headers: Record<string, string>) => send(url, { headers })),
      ];
      for (const read of reads) {
        const plain = await read(auth(s));
        expect({ status: plain.status, etag: plain.headers.etag, body: plain.body }).toEqual({
          status: 200,
          etag: `"${tag}"`,
          body,
        });
        if (old !== "") {
          const stale = await read(auth(s, { "if-none-match": `"${old}"` }));
          expect({ status: stale.status, etag: stale.headers.etag, body: stale.body }).toEqual({
            status: 200,
            etag: `"${tag}"`,
            body,
          });
        }
        const fresh = await read(auth(s, { "if-none-match": `"${tag}"` }));
        expect({ status: fresh.status, body: fresh.body }).toEqual({ status: 304, body: "" });
      }
      old = tag;
    }
  }, 120_000);

  it("stores and deletes across workers: a store made on one is written on the other at once; a DELETE on one is 404 `deleted` on the other; a store deleted on one is gone on the other (issue 14, multi-core serving)", async () => {
    const [a, b] = (await onePerWorker(s, pids)) as [Pinned, Pinned];
    for (const [maker, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const name = `lifecycle-${maker.pid}`;
      const made = await maker.request("/resources/v2/stores", {
        method: "POST",
        headers: auth(s, { "content-type": "application/json" }),
        body: JSON.stringify({ name, type: "recursive" }),
      });
      expect(made.status).toBe(201);
      expect((await other.request("/resources/v2/stores", { headers: auth(s) })).body).toContain(`"${name}"`);
      const put = await other.request(`/resources/v2/data/${name}/doc.txt`, {
        method: "PUT",
        headers: auth(s),
        body: "d",
      });
      expect(put.status).toBe(201);
      const removed = await maker.request(`/resources/v2/data/${name}/doc.txt`, { method: "DELETE", headers: auth(s) });
      expect(removed.status).toBe(200);
      const gone = await other.request(`/resources/v2/data/${name}/doc.txt`, { headers: auth(s) });
      expect({ status: gone.status, body: gone.body, etag: typeof gone.headers.etag }).toEqual({
        status: 404,
        body: "deleted",
        etag: "string",
      });
      expect((await other.request(`/resources/v2/stores/${name}`, { method: "DELETE", headers: auth(s) })).status).toBe(
        200,
      );
      const late = await maker.request(`/resources/v2/data/${name}/late.txt`, {
        method: "PUT",
        headers: auth(s),
        body: "l",
      });
      expect(late.status).toBe(404);
      const listing = await maker.request("/resources/v2/stores", { headers: auth(s) });
      expect(listing.status).toBe(200);
      expect(listing.body).not.toContain(`"${name}"`);
    }
  }, 60_000);

  it("concurrent writers on both workers: a follower polling both workers gets every write once, ids increasing, and ends on the store's state (issue 14, multi-core serving; DESIGN change feed guarantee)", async () => {
    await createStore(s, "racing");
    const start = await lastEventId(s, "racing");
    const writers = [...(await pin(s, pids, 2)).values()].flat();
    const followers = await onePerWorker(s, pids);

    // The follower: one poll after another, alternately on each worker, applying what it gets.
    const mirror = new Map<string, string>();
    const seen: Change[] = [];
    let cursor = start;
    let stopAt: number | undefined;
    const follow = (async () => {
      for (let n = 0; stopAt === undefined || cursor < stopAt; n++) {
        const c = followers[n % followers.length] as Pinned;
        const a = await c.request(`/resources/v2/poll?store=racing:${cursor}&wait=2`, { headers: auth(s) });
        if (a.status === 204) continue;
        expect(a.status).toBe(200);
        for (const change of changesOf("racing", a.body)) {
          expect(change.id).toBeGreaterThan(cursor);
          seen.push(change);
          cursor = change.id;
          mirror.set(change.path, change.tag);
        }
      }
    })();
    follow.catch(() => {});

    // Four writers, two held by each worker: 10 times their own new resource, then the shared one.
    const puts = await Promise.all(
      writers.map(async (w, i) => {
        const mine: Array<{ path: string; tag: string; body: string }> = [];
        const shared: Array<{ tag: string; body: string }> = [];
        for (let k = 0; k < 10; k++) {
          const path = `w${i}-${k}.txt`;
          const own = await w.request(`/resources/v2/data/racing/${path}`, {
            method: "PUT",
            headers: auth(s, { "content-type": "text/plain" }),
            body: `${path} by worker ${w.pid}`,
          });
          expect(own.status).toBe(201);
          mine.push({ path, tag: tagOf(own), body: `${path} by worker ${w.pid}` });
          const body = `shared, writer ${i}, write ${k}`;
          const common = await w.request("/resources/v2/data/racing/shared.txt", {
            method: "PUT",
            headers: auth(s, { "content-type": "text/plain" }),
            body,
          });
          expect([200, 201]).toContain(common.status);
          shared.push({ tag: tagOf(common), body });
        }
        return { mine, shared };
      }),
    );
    stopAt = await lastEventId(s, "racing");
    await follow;

    // Ids strictly increasing across all answers, no id twice.
    const ids = seen.map((c) => c.id);
    expect(ids).toEqual([...new Set(ids)].sort((x, y) => x - y));
    expect(ids.at(-1)).toBe(stopAt);
    // Every write to a resource written once reached the follower, exactly once, with its tag.
    for (const { path, tag } of puts.flatMap((p) => p.mine)) {
      expect(seen.filter((c) => c.path === path)).toEqual([
        { id: expect.any(Number), path, op: "modify", previous: "", tag, type: "text/plain" },
      ]);
    }
    // The shared resource: the follower ends on the tag a GET answers, which is one write's, with its body.
    const all = puts.flatMap((p) => p.shared);
    expect(new Set(all.map((w) => w.tag)).size).toBe(40);
    for (const c of followers) {
      const got = await c.request("/resources/v2/data/racing/shared.txt", { headers: auth(s) });
      expect(got.status).toBe(200);
      expect(mirror.get("shared.txt")).toBe(tagOf(got));
      expect(all.find((w) => w.tag === tagOf(got))?.body).toBe(got.body);
    }
    expect(mirror.size).toBe(41);

    // From the start: one event per resource (the latest), ids increasing, the same state.
    const full = await send(`${s.url}/resources/v2/poll?store=racing:${start}`, { headers: auth(s) });
    expect(full.status).toBe(200);
    const listed = changesOf("racing", full.body);
    const listedIds = listed.map((c) => c.id);
    expect(listedIds).toEqual([...new Set(listedIds)].sort((x, y) => x - y));
    expect(listedIds.at(-1)).toBe(stopAt);
    expect(new Map(listed.map((c) => [c.path, c.tag]))).toEqual(mirror);
    expect(listed).toHaveLength(41);
  }, 120_000);

  it("console sign-in: a code issued by one worker is taken once by the other; the refresh token works once (issue 14, multi-core serving)", async () => {
    const [a, b] = (await onePerWorker(s, pids)) as [Pinned, Pinned];
    const redirectUri = `${s.url}/console/`;
    const signIn = async (on: Pinned) => {
      const verifier = randomBytes(32).toString("base64url");
      const form = new URLSearchParams({
        response_type: "code",
        client_id: "trove-console",
        redirect_uri: redirectUri,
        state: "s-1",
        code_challenge: createHash("sha256").update(verifier).digest("base64url"),
        code_challenge_method: "S256",
        decision: "allow",
      });
      const res = await on.request("/auth/authorize", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: form.toString(),
      });
      expect(res.status).toBe(302);
      const location = new URL(res.headers.location as string);
      expect(location.origin + location.pathname).toBe(redirectUri);
      expect(location.searchParams.get("state")).toBe("s-1");
      const code = location.searchParams.get("code") as string;
      return {
        grant_type: "authorization_code",
        code,
        redirect_uri: redirectUri,
        client_id: "trove-console",
        code_verifier: verifier,
      };
    };
    const token = async (on: Pinned, form: Record<string, string>) => {
      const res = await on.request("/auth/token", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(form).toString(),
      });
      return { status: res.status, body: JSON.parse(res.body) as Record<string, unknown> };
    };
    const refresh = (on: Pinned, refreshToken: unknown) =>
      token(on, { grant_type: "refresh_token", refresh_token: String(refreshToken), client_id: "trove-console" });

    // Authorized on worker a, exchanged on worker b; the token works on a.
    const form = await signIn(a);
    const exchanged = await token(b, form);
    expect(exchanged.status).toBe(200);
    expect(exchanged.body).toMatchObject({
      token_type: "Bearer",
      // startChildServer's --token-lifetime.
      expires_in: 86400,
      refresh_token: expect.any(String),
    });
    expect(decodeJwt(String(exchanged.body.access_token))).toMatchObject({
      sub: "developer",
      client_id: "trove-console",
    });
    const stores = await a.request("/resources/v2/stores", {
      headers: { authorization: `Bearer ${exchanged.body.access_token}` },
    });
    expect(stores.status).toBe(200);
    // The refresh token, on a: works once, then not on either worker.
    const renewed = await refresh(a, exchanged.body.refresh_token);
    expect(renewed.status).toBe(200);
    expect(renewed.body.refresh_token).not.toBe(exchanged.body.refresh_token);
    for (const on of [b, a]) {
      const reused = await refresh(on, exchanged.body.refresh_token);
      expect(reused).toEqual({
        status: 400,
        body: { error: "invalid_grant", error_description: "unknown, expired or already used refresh token" },
      });
    }
    // The code replayed on a: recognised as used; then, as in one process, the record is spent: unknown on b.
    expect(await token(a, form)).toEqual({
      status: 400,
      body: { error: "invalid_grant", error_description: "authorization code already used" },
    });
    expect(await token(b, form)).toEqual({
      status: 400,
      body: { error: "invalid_grant", error_description: "unknown or expired authorization code" },
    });

    // The other way round, and a replay on the other worker revokes the refresh token it gave (RFC 6749 4.1.2).
    const second = await signIn(b);
    const got = await token(a, second);
    expect(got.status).toBe(200);
    expect((await token(b, second)).body).toEqual({
      error: "invalid_grant",
      error_description: "authorization code already used",
    });
    expect((await refresh(a, got.body.refresh_token)).status).toBe(400);
  }, 60_000);

  it("GET /metrics on either worker answers both workers' counts summed (issue 14, multi-core serving)", async () => {
    await createStore(s, "counted", "recursive");
    const put = await send(`${s.url}/resources/v2/data/counted/m.txt`, { method: "PUT", headers: auth(s), body: "m" });
    expect(put.status).toBe(201);
    const [a, b] = (await onePerWorker(s, pids)) as [Pinned, Pinned];
    const route = { face: "rest", route: "GET /resources/v2/data/{store}/{path}", status: "200" };
    const before = await metricSum(s, "trove_requests_total", route, a);
    // 10 on worker a, 7 on worker b, 8 on connections of their own (either worker).
    const gets: Array<() => Promise<Answer>> = [
      ...Array.from({ length: 10 }, () => () => a.request("/resources/v2/data/counted/m.txt", { headers: auth(s) })),
      ...Array.from({ length: 7 }, () => () => b.request("/resources/v2/data/counted/m.txt", { headers: auth(s) })),
      ...Array.from({ length: 8 }, () => () => send(`${s.url}/resources/v2/data/counted/m.txt`, { headers: auth(s) })),
    ];
    for (const get of gets) expect((await get()).status).toBe(200);
    expect(await metricSum(s, "trove_requests_total", route, a)).toBe(before + 25);
    expect(await metricSum(s, "trove_requests_total", route, b)).toBe(before + 25);
    expect(await metricSum(s, "trove_requests_total", route)).toBe(before + 25);
    // Build information is each worker's 1, not their sum.
    expect(await metricSum(s, "trove_build_info", {}, b)).toBe(1);
  }, 60_000);

  it("filesystem stores, created on either worker: a file written into the folder by another tool wakes polls parked in both workers, and either worker serves it (issue 14, multi-core serving; slot 1 scans)", async () => {
    const creators = await onePerWorker(s, await bySlot(pids));
    for (const [i, creator] of creators.entries()) {
      const name = `folder-by-slot-${i + 1}`;
      const folder = await mkdtemp(join(tmpdir(), "trove-workers-folder-"));
      dirs.push(folder);
      const made = await creator.request("/resources/v2/stores", {
        method: "POST",
        headers: auth(s, { "content-type": "application/json" }),
        body: JSON.stringify({ name, type: "filesystem", settings: { "filesystem-location": folder } }),
      });
      expect(made.status).toBe(201);
      try {
        const cursor = await lastEventId(s, name);
        const polls = [...(await pin(s, pids, 2)).values()].flat();
        const waiting = polls.map((c) =>
          c.request(`/resources/v2/poll?store=${name}:${cursor}&wait=60`, { headers: auth(s) }),
        );
        await parked(s, 4);
        await writeFile(join(folder, "from-outside.txt"), "written by another tool");
        const answers = await Promise.all(waiting);
        for (const a of answers) {
          expect({ creator: i + 1, status: a.status }).toEqual({ creator: i + 1, status: 200 });
          expect(changesOf(name, a.body).some((c) => c.path === "from-outside.txt" && c.op === "modify")).toBe(true);
        }
        const tag = changesOf(name, answers[0]?.body ?? "").find((c) => c.path === "from-outside.txt")?.tag;
        for (const c of creators) {
          const got = await c.request(`/resources/v2/data/${name}/from-outside.txt`, { headers: auth(s) });
          expect({ status: got.status, etag: got.headers.etag, body: got.body }).toEqual({
            status: 200,
            etag: `"${tag}"`,
            body: "written by another tool",
          });
        }
      } finally {
        const removed = await creator.request(`/resources/v2/stores/${name}`, { method: "DELETE", headers: auth(s) });
        expect(removed.status).toBe(200);
        for (const c of opened.splice(0)) if (!creators.includes(c)) c.close();
        opened.push(...creators);
      }
    }
  }, 120_000);

  it("filesystem stores: deleted on one worker and made again on another folder, every worker comes to serve the new folder (issue 14, multi-core serving)", async () => {
    const [one, two] = (await onePerWorker(s, await bySlot(pids))) as [Pinned, Pinned];
    const before = await mkdtemp(join(tmpdir(), "trove-workers-before-"));
    const after = await mkdtemp(join(tmpdir(), "trove-workers-after-"));
    dirs.push(before, after);
    await writeFile(join(before, "old.txt"), "in the first folder");
    await writeFile(join(after, "new.txt"), "in the second folder");
    const create = (on: Pinned, folder: string) =>
      on.request("/resources/v2/stores", {
        method: "POST",
        headers: auth(s, { "content-type": "application/json" }),
        body: JSON.stringify({ name: "moved", type: "filesystem", settings: { "filesystem-location": folder } }),
      });
    const read = async (on: Pinned, path: string) => {
      const got = await on.request(`/resources/v2/data/moved/${path}`, { headers: auth(s) });
      return { status: got.status, body: got.status === 200 ? got.body : "" };
    };
    expect((await create(one, before)).status).toBe(201);
    // Both workers serve the first folder.
    for (const on of [one, two]) {
      expect(
        await until("old.txt served", async () => ((await read(on, "old.txt")).status === 200 ? true : undefined)),
      ).toBe(true);
    }
    expect((await two.request("/resources/v2/stores/moved", { method: "DELETE", headers: auth(s) })).status).toBe(200);
    expect((await create(two, after)).status).toBe(201);
    try {
      for (const on of [two, one]) {
        let seen: unknown;
        await until(
          `worker ${on.pid} serving the second folder`,
          async () => {
            seen = [await read(on, "new.txt"), await read(on, "old.txt")];
            const [fresh, stale] = seen as Array<{ status: number; body: string }>;
            return fresh?.status === 200 && stale?.status === 404 ? true : undefined;
          },
          () => seen,
        );
        expect(await read(on, "new.txt")).toEqual({ status: 200, body: "in the second folder" });
      }
    } finally {
      expect((await one.request("/resources/v2/stores/moved", { method: "DELETE", headers: auth(s) })).status).toBe(
        200,
      );
    }
  }, 120_000);

  it("content-insights reports: requested on either worker, generated by slot 1's report worker, watched and served on the other (issue 14, multi-core serving)", async () => {
    const p = await reportProject(s, "acrossworkers");
    const [one, two] = (await onePerWorker(s, await bySlot(pids))) as [Pinned, Pinned];
    for (const [on, watch] of [
      [two, one],
      [one, two],
    ] as const) {
      const { id, status } = await reportAcross(s, p, on, watch);
      expect(status).toMatchObject({ id: [id], status: "generated" });
      const query = `projectID=${p.projectID}&environmentID=${p.environmentID}`;
      const documents = [];
      for (const c of [one, two]) {
        const doc = await c.request(`/insights/v1/reports/${id}/document?${query}`, { headers: auth(s) });
        expect(doc.status).toBe(200);
        expect(doc.headers.etag).toBe(`"${id}"`);
        documents.push(doc.body);
      }
      expect(documents[1]).toBe(documents[0]);
      expect(JSON.parse(documents[0] as string)).toMatchObject({ version: "1.0" });
    }
  }, 120_000);
});

describe("trove serve --workers 2: processes (issue 14, multi-core serving)", () => {
  it("slot 1's worker killed with SIGKILL is started again: every connection is served, data intact, feed relayed, reports generated (issue 14, multi-core serving)", async () => {
    const { s, pids } = await startWorkers();
    const p = await reportProject(s, "aftercrash");
    await createStore(s, "survivor", "recursive");
    const put = await send(`${s.url}/resources/v2/data/survivor/kept.txt`, {
      method: "PUT",
      headers: auth(s),
      body: "kept across a crash",
    });
    expect(put.status).toBe(201);
    // Slot 1's: the one that also runs the report worker.
    const [victim, survivor] = (await bySlot(pids)) as [number, number];
    process.kill(victim, "SIGKILL");

    let live: number[] = [];
    const now = await until(
      "a new worker in place of the killed one",
      async () => {
        live = [];
        for (const pid of await workerPids(s.pid)) {
          workers.add(pid);
          if (await alive(pid)) live.push(pid);
        }
        return live.length === 2 && !live.includes(victim) && live.includes(survivor) ? live : undefined;
      },
      () => ({ victim, survivor, live, stderr: s.stderr() }),
    );
    const restarted = now.find((pid) => pid !== survivor) as number;

    // Fresh connections: every one answered, with the data written before the crash.
    let refused: unknown;
    await until(
      "the restarted worker serving",
      () =>
        pin(s, [survivor, restarted], 1).catch((err: Error) => {
          refused = err.message;
          return undefined;
        }),
      () => ({ refused, stderr: s.stderr() }),
    );
    for (let i = 0; i < 8; i++) {
      const got = await send(`${s.url}/resources/v2/data/survivor/kept.txt`, { headers: auth(s) });
      expect({ status: got.status, etag: got.headers.etag, body: got.body }).toEqual({
        status: 200,
        etag: put.headers.etag,
        body: "kept across a crash",
      });
    }
    // The restarted worker is linked to the other: a poll parked in the survivor wakes for its PUT.
    const [onSurvivor, onRestarted] = (await onePerWorker(s, [survivor, restarted])) as [Pinned, Pinned];
    await pollWakesFor(s, "survivor", onSurvivor, onRestarted, "after.txt");
    // The restarted worker holds slot 1 and runs the report worker: a report asked of the survivor is generated.
    expect(await slotOf(restarted)).toBe(1);
    const { id, status } = await reportAcross(s, p, onSurvivor, onSurvivor);
    expect(status).toMatchObject({ id: [id], status: "generated" });
  }, 120_000);

  it("--workers auto starts one worker per core (os.availableParallelism) (issue 14, multi-core serving)", async () => {
    const s = await startChildServer({ args: ["--workers", "auto"] });
    servers.push(s);
    const pids = await until("the workers", async () => {
      const found = await workerPids(s.pid);
      return found.length === availableParallelism() ? found : undefined;
    });
    for (const pid of pids) workers.add(pid);
    expect((await Promise.all(pids.map(slotOf))).sort((a, b) => a - b)).toEqual(
      Array.from({ length: availableParallelism() }, (_, i) => i + 1),
    );
    const held = await until("every worker serving", () => pin(s, pids, 1).catch(() => undefined));
    for (const [pid, [c]] of held) {
      const got = await (c as Pinned).request("/resources/v2/data/home/", { headers: auth(s) });
      expect({ pid, status: got.status }).toEqual({ pid, status: 200 });
    }
  }, 60_000);

  it("--max-connections is split between the workers: 2 in all, one each; with both busy, the next connection on either answers 503 (issue 14, multi-core serving; issue 29: only idle ones make room)", async () => {
    // The default keep-alive timeout (5 s): the connection of startChildServer's readiness check
    // (fetch keeps it, as long as the server's Keep-Alive says) is closed by the server soon.
    const s = await startChildServer({ args: ["--workers", "2", "--max-connections", "2"] });
    servers.push(s);
    const pids = await until("two worker processes", async () => {
      const found = await workerPids(s.pid);
      return found.length === 2 ? found : undefined;
    });
    for (const pid of pids) workers.add(pid);
    const held = await until("one connection held by each worker", () => pinUnderLimit(s, pids));
    // Each held connection has an upload in flight: busy, so neither worker has an idle one to close
    // for a newcomer (an idle one would make room: test/security/slow-clients.test.ts).
    const uploads = held.map((c, i) => slowUpload(c, `/resources/v2/data/home/busy-${i}.txt`, 10));
    for (const upload of uploads) {
      await upload.started;
      await upload.write("busy ");
    }
    for (let i = 0; i < 4; i++) {
      const refused = await send(`${s.url}/healthz`);
      expect({ status: refused.status, retryAfter: refused.headers["retry-after"] }).toEqual({
        status: 503,
        retryAfter: "1",
      });
      expect(refused.body).toMatch(/at most 1 open/);
    }
    // Both held connections are served all the while: their uploads finish and are stored.
    for (const upload of uploads) upload.end("busy!");
    for (const upload of uploads) expect((await upload.response).status).toBe(201);
    for (let i = 0; i < held.length; i++) {
      const stored = await send(`${s.url}/resources/v2/data/home/busy-${i}.txt`, { headers: auth(s) });
      expect({ status: stored.status, body: stored.body }).toEqual({ status: 200, body: "busy busy!" });
    }
  }, 60_000);

  it("a worker ignores SIGTERM and SIGINT sent to it directly: it keeps its parked poll and serves on (issue 14, multi-core serving; the primary decides)", async () => {
    const { s, pids } = await startWorkers();
    const [target, other] = pids as [number, number];
    const [onTarget, onOther] = (await onePerWorker(s, [target, other])) as [Pinned, Pinned];
    // Still parked after the signals: a PUT on the other worker is what answers it.
    await pollWakesFor(s, "home", onTarget, onOther, "after-signals.txt", () => {
      process.kill(target, "SIGTERM");
      process.kill(target, "SIGINT");
    });
    expect((await onTarget.request("/resources/v2/data/home/after-signals.txt", { headers: auth(s) })).status).toBe(
      200,
    );
    expect(await workerPids(s.pid)).toEqual(pids);
  }, 60_000);

  it("SIGTERM to the primary: parked polls in both workers answer 204, an upload in flight completes, every process ends, exit code 0 (issue 14, multi-core serving)", async () => {
    const { s, pids } = await startWorkers();
    const cursor = await lastEventId(s, "home");
    const held = await pin(s, pids, 3);
    const [uploading] = held.get(pids[0] as number)?.splice(0, 1) ?? [];
    const upload = slowUpload(uploading as Pinned, "/resources/v2/data/home/drained.txt", 23);
    await upload.started;
    await upload.write("first half, ");
    const polls = [...held.values()].flat();
    const waiting = polls.map((c) =>
      c.request(`/resources/v2/poll?store=home:${cursor}&wait=60`, { headers: auth(s) }),
    );
    await parked(s, 5);
    process.kill(s.pid, "SIGTERM");
    for (const answer of await Promise.all(waiting)) {
      expect({ status: answer.status, body: answer.body }).toEqual({ status: 204, body: "" });
    }
    // The upload's worker waits for it (the drain); its answer closes the connection.
    upload.end("second half");
    const answer = await upload.response;
    expect({ status: answer.status, connection: answer.headers.connection }).toEqual({
      status: 201,
      connection: "close",
    });
    expect(await s.exited).toEqual({ code: 0, signal: null });
    for (const pid of [s.pid, ...pids]) {
      await until(`process ${pid} gone`, async () => ((await alive(pid)) ? undefined : true));
    }
    // Stored: workers on the same directory serve it.
    const again = await startWorkers({ dataDir: s.dataDir });
    const got = await send(`${again.s.url}/resources/v2/data/home/drained.txt`, { headers: auth(again.s) });
    expect({ status: got.status, body: got.body }).toEqual({ status: 200, body: "first half, second half" });
  }, 60_000);

  it("SIGTERM while the workers are still starting: each one stops once it listens, every process ends, exit code 0 (issue 14, multi-core serving)", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "trove-workers-early-"));
    dirs.push(dataDir);
    const child = spawn(
      process.execPath,
      [CLI, "serve", ...WORKERS_ARGS, "--port", String(await freePort()), "--data", dataDir, "--log-level", "silent"],
      { stdio: ["ignore", "ignore", "ignore"] },
    );
    children.push(child);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    // As soon as the first worker process exists: it is loading, not yet able to hear the primary.
    const early = await until("a worker process", async () => {
      const found = await workerPids(child.pid as number);
      for (const pid of found) workers.add(pid);
      return found.length > 0 ? found : undefined;
    });
    child.kill("SIGTERM");
    expect(await exited).toEqual({ code: 0, signal: null });
    for (const pid of early) await until(`worker ${pid} gone`, async () => ((await alive(pid)) ? undefined : true));
  }, 60_000);

  it("a second SIGTERM during the drain stops every worker at once: the upload is cut, exit code 143 (issue 14, multi-core serving; docs/operations.md)", async () => {
    const { s, pids } = await startWorkers();
    const [busy, idle] = pids as [number, number];
    const [c] = await onePerWorker(s, [busy, idle]);
    const upload = slowUpload(c as Pinned, "/resources/v2/data/home/interrupted.txt", 100);
    await upload.started;
    await upload.write("a start");
    process.kill(s.pid, "SIGTERM");
    // The idle worker drains at once and ends; the busy one waits for the upload.
    await until("the idle worker gone", async () => ((await alive(idle)) ? undefined : true));
    expect(await alive(busy)).toBe(true);
    process.kill(s.pid, "SIGTERM");
    await expect(upload.response).rejects.toThrow();
    expect(await s.exited).toEqual({ code: 143, signal: null });
    await until("the busy worker gone", async () => ((await alive(busy)) ? undefined : true));
  }, 60_000);

  it("a worker whose primary is killed (SIGKILL) shuts down gracefully: its parked poll answers 204, it ends (issue 14, multi-core serving)", async () => {
    const { s, pids } = await startWorkers();
    const cursor = await lastEventId(s, "home");
    const polls = await onePerWorker(s, pids);
    const waiting = polls.map((c) =>
      c.request(`/resources/v2/poll?store=home:${cursor}&wait=60`, { headers: auth(s) }),
    );
    await parked(s, 2);
    // The primary alone (s.kill() would end its workers too, as a crash of the whole server).
    process.kill(s.pid, "SIGKILL");
    await s.exited;
    for (const answer of await Promise.all(waiting)) {
      expect({ status: answer.status, body: answer.body }).toEqual({ status: 204, body: "" });
    }
    for (const pid of pids) await until(`worker ${pid} gone`, async () => ((await alive(pid)) ? undefined : true));
  }, 60_000);
});

describe("trove serve --workers: refusals (issue 14, multi-core serving)", () => {
  const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    promisify(execFile)(process.execPath, [CLI, "serve", ...args], { env: { ...process.env, ...env } }).then(
      ({ stderr }) => ({ code: 0, stderr }),
      (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
    );

  it("--workers 0, 65, x (and TROVE_WORKERS=0): usage error, exit code 2, nothing started", async () => {
    const dir = await mkdtemp(join(tmpdir(), "trove-workers-usage-"));
    dirs.push(dir);
    const data = join(dir, "data");
    for (const given of ["0", "65", "x", "1.5"]) {
      expect(await run(["--workers", given, "--port", "0", "--data", data])).toEqual({
        code: 2,
        stderr: `trove serve: workers must be a whole number from 1 to 64, not "${given}"\n`,
      });
    }
    expect(await run(["--port", "0", "--data", data], { TROVE_WORKERS: "0" })).toEqual({
      code: 2,
      stderr: 'trove serve: workers must be a whole number from 1 to 64, not "0"\n',
    });
    // Nothing was started: not even the data directory was made.
    expect(await readdir(dir)).toEqual([]);
  }, 60_000);

  it("a single-process trove serve on the workers' data directory is refused; the workers keep serving (issue 14, multi-core serving)", async () => {
    const { s, pids } = await startWorkers();
    const put = await send(`${s.url}/resources/v2/data/home/before.txt`, {
      method: "PUT",
      headers: auth(s),
      body: "b",
    });
    expect(put.status).toBe(201);
    const refused = await run([
      "--workers",
      "1",
      "--port",
      String(await freePort()),
      "--data",
      s.dataDir,
      "--log-level",
      "silent",
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `trove serve: the data directory ${s.dataDir} is in use by another process (another trove serve?): stop it, or give this one another --data directory\n`,
    );
    for (const c of await onePerWorker(s, pids)) {
      const got = await c.request("/resources/v2/data/home/before.txt", { headers: auth(s) });
      expect({ status: got.status, etag: got.headers.etag, body: got.body }).toEqual({
        status: 200,
        etag: put.headers.etag,
        body: "b",
      });
      const write = await c.request(`/resources/v2/data/home/by-${c.pid}.txt`, {
        method: "PUT",
        headers: auth(s),
        body: "w",
      });
      expect(write.status).toBe(201);
    }
  }, 60_000);

  it("workers on the data directory of a running single-process trove serve are refused; it keeps serving (issue 14, multi-core serving)", async () => {
    const single = await startChildServer({ args: ["--workers", "1"] });
    servers.push(single);
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [CLI, "serve", ...WORKERS_ARGS, "--port", String(port), "--data", single.dataDir, "--log-level", "silent"],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    children.push(child);
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
    });
    const exited = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    expect(exited).toEqual({ code: 1, signal: null });
    expect(stderr).toContain(
      `trove serve: the data directory ${single.dataDir} is in use by another process (another trove serve?): stop it, or give this one another --data directory\n`,
    );
    const got = await send(`${single.url}/resources/v2/data/home/`, { headers: auth(single) });
    expect(got.status).toBe(200);
  }, 60_000);
});
