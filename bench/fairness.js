// Fair under pressure (issue 29): one `trove serve` child at its default limits, and at once
// - 2,000 long polls parked by one token (this script, raw HTTP/1.1 sockets),
// - 200 slow-header connections (Debian's slowhttptest -H, Slowloris),
// - 100 slow-body connections without a token (slowhttptest -B, R-U-Dead-Yet),
// - 100 slow-body uploads with the token (this script: a byte every 2 s),
// - 50 idle h2c sessions, each sending a PING every 5 s (this script, node:http2),
// while a second client's GETs and PUTs (4 KiB, one at a time, a new connection each) are
// timed, and h2load (Debian's nghttp2-client) runs 20,000 GETs on 100 h2c connections. The same client runs alone first, on the same server: the baseline of the ratios. Prints
// the second client's 503s and other failures, p50 and p99, the first client's polls answered 429
// (its share) and still parked, and what became of the slow clients.
//
// `node bench/fairness.js [--seconds 40] [--polls 2000] [-- extra trove serve flags]`
// Needs slowhttptest (apt-get install slowhttptest); without it, says so and runs the rest.

import { execFileSync, spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { buildDist, startTrove } from "./servers.js";

const { values: opts, positionals } = parseArgs({
  options: {
    seconds: { type: "string", default: "40" },
    polls: { type: "string", default: "2000" },
  },
  allowPositionals: true,
});
const SECONDS = Number(opts.seconds);
const POLLS = Number(opts.polls);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fds = (pid) => readdirSync(`/proc/${pid}/fd`).length;

function hasSlowhttptest() {
  try {
    execFileSync("slowhttptest", ["-h"], { stdio: "ignore" });
  } catch (err) {
    // It exits non-zero after its help: only a missing program counts.
    return err.code !== "ENOENT";
  }
  return true;
}

/**
 * The second client: GET and PUT in turn for `ms`, one at a time, each on a new connection (as
 * clients that come and go do: a kept-alive connection opened before an attack is never refused).
 */
async function measure(url, authorization, ms) {
  const agent = new http.Agent({ keepAlive: false });
  const body = Buffer.alloc(4096, 0x61);
  const times = [];
  const statuses = new Map();
  const end = Date.now() + ms;
  let i = 0;
  const call = (method, path) =>
    new Promise((resolve) => {
      const started = performance.now();
      const req = http.request(
        `${url}${path}`,
        {
          method,
          agent,
          headers: { authorization, ...(method === "PUT" ? { "content-length": body.length } : {}) },
        },
        (res) => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode, ms: performance.now() - started }));
        },
      );
      req.on("error", (err) => resolve({ status: err.code ?? "error", ms: performance.now() - started }));
      req.end(method === "PUT" ? body : undefined);
    });
  while (Date.now() < end) {
    // A PUT, then a GET of what it wrote.
    const path = `/resources/v2/data/second/f${Math.floor(i / 2) % 50}.txt`;
    const r = await call(i % 2 === 0 ? "PUT" : "GET", path);
    i++;
    times.push(r.ms);
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
  }
  agent.destroy();
  times.sort((a, b) => a - b);
  const q = (p) => times[Math.min(times.length - 1, Math.floor(p * times.length))];
  return { count: times.length, p50: q(0.5), p99: q(0.99), statuses: Object.fromEntries(statuses) };
}

/** Parks `n` polls from one token, each on its own connection; counts the answers they get. */
function parkPolls(port, authorization, cursor, n) {
  const answers = new Map();
  const sockets = [];
  for (let i = 0; i < n; i++) {
    const s = net.connect(port, "127.0.0.1");
    s.on("error", () => {});
    let seen = false;
    s.on("data", (d) => {
      if (seen) return;
      seen = true;
      const status = d.toString("latin1", 9, 12);
      answers.set(status, (answers.get(status) ?? 0) + 1);
    });
    s.write(
      `GET /resources/v2/poll?store=home:${cursor}&wait=600 HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\n\r\n`,
    );
    sockets.push(s);
  }
  return {
    answers,
    parked: () => sockets.filter((s) => !s.destroyed && !s.readableEnded).length,
    stop: () => {
      for (const s of sockets) s.destroy();
    },
  };
}

/** Uploads that trickle a byte every 2 s, with the token; counts how they end. */
function trickle(port, authorization, n) {
  const ends = new Map();
  const sockets = [];
  for (let i = 0; i < n; i++) {
    const s = net.connect(port, "127.0.0.1");
    s.on("error", () => {});
    let answer = "";
    s.on("data", (d) => {
      answer += d.toString("latin1");
    });
    s.on("close", () => {
      const status = answer.slice(9, 12) || "closed";
      ends.set(status, (ends.get(status) ?? 0) + 1);
    });
    s.write(
      `PUT /resources/v2/data/second/trickle-${i}.bin HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nContent-Length: 100000\r\n\r\n`,
    );
    sockets.push(s);
  }
  const timer = setInterval(() => {
    for (const s of sockets) if (!s.destroyed) s.write("x");
  }, 2000);
  return {
    ends,
    stop: () => {
      clearInterval(timer);
      for (const s of sockets) s.destroy();
    },
  };
}

/** Idle h2c sessions that PING every 5 s; counts those the server closed. */
function idleSessions(url, n) {
  let closed = 0;
  const sessions = [];
  for (let i = 0; i < n; i++) {
    const s = http2.connect(url);
    s.on("error", () => {});
    s.once("close", () => closed++);
    sessions.push(s);
  }
  const timer = setInterval(() => {
    for (const s of sessions) if (!s.closed && !s.destroyed) s.ping(() => {});
  }, 5000);
  return {
    closed: () => closed,
    stop: () => {
      clearInterval(timer);
      for (const s of sessions) s.destroy();
    },
  };
}

function slowhttptest(args) {
  const child = spawn("slowhttptest", args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d) => {
    out = (out + d).slice(-3000);
  });
  child.stderr.on("data", () => {});
  const exited = new Promise((resolve) => child.once("exit", resolve));
  return {
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGINT");
      await Promise.race([exited, sleep(5000)]);
      if (child.exitCode === null) child.kill("SIGKILL");
      // Its last status block: connected, pending, closed, service available.
      const last = out.split("slow HTTP test status on").pop() ?? "";
      return last
        .split("\n")
        .map((l) => l.replace(/\x1b\[[0-9;]*m/g, "").trim())
        .filter((l) => /connections|service available/i.test(l))
        .join("; ");
    },
  };
}

buildDist();
// --poll-wait 600: the parked polls outlast the run (the default, 30 s, would answer them 204).
const server = await startTrove({ logLevel: "warn", pollWait: 600, serveArgs: positionals });
try {
  const { url, port, authorization, pid } = server;
  // The second client writes to a store of its own: its changes do not answer the parked polls.
  const created = await fetch(`${url}/resources/v2/stores`, {
    method: "POST",
    headers: { authorization, "content-type": "application/json" },
    body: JSON.stringify({ name: "second", type: "recursive" }),
  });
  if (created.status !== 201) throw new Error(`store not created: ${created.status} ${await created.text()}`);
  const status = await (await fetch(`${url}/resources/v2/poll`, { headers: { authorization } })).text();
  const cursor = /^RESET home (\d+)$/m.exec(status)?.[1] ?? "0";

  console.log(
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}; server fds idle ${fds(pid)}`,
  );
  const alone = await measure(url, authorization, SECONDS * 250);
  console.log(
    `second client alone:        ${alone.count} requests, p50 ${alone.p50.toFixed(2)} ms, p99 ${alone.p99.toFixed(2)} ms, ${JSON.stringify(alone.statuses)}`,
  );

  const polls = parkPolls(port, authorization, cursor, POLLS);
  const sessions = idleSessions(url, 50);
  const trickles = trickle(port, authorization, 100);
  const tools = hasSlowhttptest()
    ? [
        slowhttptest([
          "-H",
          "-c",
          "200",
          "-r",
          "200",
          "-i",
          "5",
          "-l",
          String(SECONDS + 20),
          "-u",
          `${url}/resources/v2/data/home/`,
        ]),
        slowhttptest([
          "-B",
          "-c",
          "100",
          "-r",
          "100",
          "-i",
          "5",
          "-s",
          "100000",
          "-l",
          String(SECONDS + 20),
          "-u",
          `${url}/resources/v2/data/home/b.bin`,
          "-t",
          "PUT",
        ]),
      ]
    : [];
  if (tools.length === 0)
    console.log("slowhttptest not installed: slow headers and unauthenticated slow bodies NOT run");
  await sleep(5000);
  const during = fds(pid);
  const loaded = await measure(url, authorization, SECONDS * 1000);
  console.log(
    `second client under attack: ${loaded.count} requests, p50 ${loaded.p50.toFixed(2)} ms, p99 ${loaded.p99.toFixed(2)} ms, ${JSON.stringify(loaded.statuses)}`,
  );
  console.log(
    `  ratio p99 under attack / alone: ${(loaded.p99 / alone.p99).toFixed(2)}x; 503s: ${loaded.statuses[503] ?? 0}`,
  );
  // Many HTTP/2 connections and streams from a client Trove did not write, during the attack.
  try {
    const out = execFileSync(
      "h2load",
      [
        "-n",
        "20000",
        "-c",
        "100",
        "-m",
        "10",
        "-H",
        `authorization: ${authorization}`,
        `${url}/resources/v2/data/second/f0.txt`,
      ],
      { encoding: "utf8", timeout: 120_000 },
    );
    const lines = out.split("\n").filter((l) => /^(finished in|requests:|status codes:)|^time for request:/.test(l));
    console.log(`h2load, 100 h2c connections x 10 streams, 20,000 GETs during the attack:\n  ${lines.join("\n  ")}`);
  } catch (err) {
    console.log(
      `h2load not run: ${err.code === "ENOENT" ? "not installed (apt-get install nghttp2-client)" : err.message}`,
    );
  }
  console.log(
    `first client's ${POLLS} polls: ${polls.parked()} still parked, answered ${JSON.stringify(Object.fromEntries(polls.answers))}`,
  );
  console.log(`trickled uploads with the token (100): ended ${JSON.stringify(Object.fromEntries(trickles.ends))}`);
  console.log(`idle h2c sessions that PING every 5 s (50): ${sessions.closed()} closed by the server`);
  console.log(`server fds 5 s into the attack ${during}, at the end ${fds(pid)}`);
  const metrics = await (await fetch(`${url}/metrics`)).text();
  console.log(
    metrics
      .split("\n")
      .filter((l) => l.startsWith("trove_limit_refusals_total") || l.startsWith("trove_long_lived_requests"))
      .join("\n"),
  );
  for (const [i, t] of tools.entries()) console.log(`slowhttptest ${i === 0 ? "-H" : "-B"}: ${await t.stop()}`);
  polls.stop();
  sessions.stop();
  trickles.stop();
} finally {
  await server.stop();
}
