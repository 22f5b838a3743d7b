// `trove serve` with no --workers (issue 32 item 4: every core by default), in a child process from
// dist/, as an operator and clients see it: one worker per core (or TROVE_WORKERS, which CI's
// second run sets to 1), one ready line and one development banner, the read-only switch in force
// on every worker, and SIGTERM ending every process. Which worker holds a connection is read from
// /proc (test/support/workers.ts), never from the server.

import { spawn } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { trove } from "../backup/run-cli.js";
import { type ChildServer, freePort } from "../support/child-server.js";
import {
  type Answer,
  alive,
  auth,
  children,
  cleanUp,
  defaultWorkers,
  dirs,
  onePerWorker,
  type Pinned,
  send,
  startWorkers,
  until,
  workerPids,
  workers,
} from "../support/workers.js";

const CLI = fileURLToPath(new URL("../../bin/trove.js", import.meta.url));

/** The workers `trove serve` starts without --workers: TROVE_WORKERS where set, else one per core. */
const EXPECTED = defaultWorkers();

afterEach(cleanUp);

function put(s: ChildServer, path: string, body: string, via?: Pinned): Promise<Answer> {
  const init = { method: "PUT", headers: auth(s, { "content-type": "text/plain" }), body };
  return via ? via.request(path, init) : send(`${s.url}${path}`, init);
}

describe("trove serve at its defaults: every core (issue 32 item 4)", () => {
  it("issue 32 item 4: with no --workers, one worker per core (TROVE_WORKERS if set) serves the port; the ready line and the development banner are written once; SIGTERM ends every process with exit 0", async () => {
    const dir = await mkdtemp(join(tmpdir(), "trove-default-workers-"));
    dirs.push(dir);
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [CLI, "serve", "--port", String(port), "--data", dir, "--log-level", "info"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    children.push(child);
    let out = "";
    let err = "";
    child.stdout?.setEncoding("utf8").on("data", (t: string) => {
      out += t;
    });
    child.stderr?.setEncoding("utf8").on("data", (t: string) => {
      err += t;
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const ready = () =>
      out
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as { msg: string; workers?: number; port?: number })
        .filter((l) => /^Trove \S+ listening on /.test(l.msg));
    await until(
      "the ready line",
      async () => (ready().length > 0 ? true : undefined),
      () => ({ out, err }),
    );
    // Written when every worker listens, and the banner right after it: both there, once.
    await until("the development banner", async () => (err.includes("client secret") ? true : undefined));
    const pid = child.pid as number;
    const pids = EXPECTED === 1 ? [] : await workerPids(pid);
    for (const w of pids) workers.add(w);
    expect(pids).toHaveLength(EXPECTED === 1 ? 0 : EXPECTED);
    expect((await send(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    const lines = ready();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ workers: EXPECTED, port });
    expect(err.split("DEVELOPMENT MODE").length - 1).toBe(1);

    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    for (const w of pids) expect(await alive(w)).toBe(false);
    expect(ready()).toHaveLength(1);
  });

  it("issue 32 item 4, issue 28 read-only switch: `trove backup read-only on` through one worker holds on every worker: PUTs on a connection held by each worker and on 24 fresh connections all answer 503 with Retry-After 7 and change nothing; `off`, and they all succeed", async () => {
    const { s, pids } = await startWorkers({ defaults: true });
    const held = await onePerWorker(s, pids);
    const original = await put(s, "/resources/v2/data/home/kept.txt", "before");
    expect(original.status).toBe(201);
    const token = s.authorization.slice("Bearer ".length);

    const on = await trove(["backup", "read-only", "on", "--url", s.url, "--token", token, "--retry-after", "7"]);
    expect(on).toEqual({ code: 0, stdout: "read-only on\n", stderr: "" });
    const refused = [
      ...(await Promise.all(held.map((c, i) => put(s, "/resources/v2/data/home/kept.txt", `held ${i}`, c)))),
      ...(await Promise.all(
        Array.from({ length: 24 }, (_, i) => put(s, `/resources/v2/data/home/fresh-${i}.txt`, `fresh ${i}`)),
      )),
    ];
    for (const a of refused) {
      expect({ status: a.status, retryAfter: a.headers["retry-after"], body: a.body }).toEqual({
        status: 503,
        retryAfter: "7",
        body: "the server is read-only for a while (an operator is moving or backing it up): try again later\n",
      });
    }
    // The refusal closes its connection (the body is not read): the reads go on new ones.
    for (let i = 0; i < 4; i++) {
      const read = await send(`${s.url}/resources/v2/data/home/kept.txt`, { headers: auth(s) });
      expect({ status: read.status, body: read.body, etag: read.headers.etag }).toEqual({
        status: 200,
        body: "before",
        etag: original.headers.etag,
      });
    }
    expect((await send(`${s.url}/resources/v2/data/home/fresh-0.txt`, { headers: auth(s) })).status).toBe(404);

    const off = await trove(["backup", "read-only", "off", "--url", s.url, "--token", token]);
    expect(off).toEqual({ code: 0, stdout: "read-only off\n", stderr: "" });
    // New connections held by each worker again.
    const again = await onePerWorker(s, pids);
    for (const [i, c] of again.entries()) {
      expect((await put(s, "/resources/v2/data/home/kept.txt", `held ${i}`, c)).status).toBe(200);
    }
    const written = await Promise.all(
      Array.from({ length: 24 }, (_, i) => put(s, `/resources/v2/data/home/fresh-${i}.txt`, `fresh ${i}`)),
    );
    expect(written.map((a) => a.status)).toEqual(Array(24).fill(201));
  });
});
