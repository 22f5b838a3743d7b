// Hostile clients against one `trove serve` child process (issue 12, items 1 and 2):
// the server's RSS while a 300 MB body without a token is sent to each face, how long a
// request that announces 1 GiB waits for its answer, and GET latency while 200 slow or
// silent connections are open, beside a bare node:http server answering the same number of bytes
// (the baseline), and when the server closes them. `node bench/attack.js [--root DIR]
// [--size-mib 300] [--runs 3] [--slow-seconds 25] [--only bodies|slow]` (DIR: a checkout with
// dist/ built, default this one; extra arguments go to `trove serve`).

import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import * as http2 from "node:http2";
import * as net from "node:net";
import { cpus, loadavg } from "node:os";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { freePort, procStatusBytes, startTrove } from "./servers.js";

const { values: opts, positionals } = parseArgs({
  options: {
    root: { type: "string", default: "." },
    "size-mib": { type: "string", default: "300" },
    slow: { type: "string", default: "200" },
    "slow-seconds": { type: "string", default: "25" },
    runs: { type: "string", default: "3" },
    only: { type: "string" },
  },
  allowPositionals: true,
});
const ROOT = resolve(opts.root);
const SIZE = Number(opts["size-mib"]) * 1024 * 1024;

const rss = (pid) => procStatusBytes(pid, "VmRSS");
const mib = (n) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** `trove serve` of the checkout ROOT, one process (whose memory and descriptors this measures; the arguments may choose more). */
const startServer = () => startTrove({ root: ROOT, serveArgs: positionals });

/** Sends a request head then up to SIZE bytes over HTTP/1.1; resolves with the status line and bytes sent. */
function h1Flood(port, head) {
  return new Promise((done) => {
    const socket = net.connect(port, "127.0.0.1");
    const block = Buffer.alloc(1024 * 1024, 0x20);
    let sent = 0;
    let answer = "";
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      socket.destroy();
      done({ status: answer.split("\r\n")[0] || "(no answer)", sent });
    };
    const pump = () => {
      while (sent < SIZE && !answer) {
        sent += block.length;
        if (!socket.write(block)) return;
      }
      if (sent >= SIZE) setTimeout(finish, 2000);
    };
    socket.on("data", (d) => {
      answer += d.toString("latin1");
      setTimeout(finish, 200);
    });
    socket.on("drain", pump);
    socket.on("error", finish);
    socket.on("close", finish);
    // A server that neither reads nor answers: give up after a minute.
    setTimeout(finish, 60_000).unref();
    socket.write(head);
    pump();
  });
}

function h2Flood(port, headers, prefix) {
  return new Promise((done) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => {});
    const req = session.request({ ":method": "POST", ...headers }, { endStream: false });
    const block = Buffer.alloc(1024 * 1024, 0);
    let sent = 0;
    let status = "(no answer)";
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      session.destroy();
      done({ status, sent });
    };
    req.on("response", (h) => {
      status = `${h[":status"]} grpc-status=${h["grpc-status"] ?? "-"}`;
      setTimeout(finish, 200);
    });
    req.on("trailers", (t) => {
      status += ` trailer grpc-status=${t["grpc-status"]}`;
    });
    req.resume();
    req.write(prefix);
    req.on("error", finish);
    req.on("close", finish);
    const pump = () => {
      while (sent < SIZE && !finished) {
        sent += block.length;
        if (!req.write(block)) return;
      }
      if (sent >= SIZE) setTimeout(finish, 2000);
    };
    req.on("drain", pump);
    setTimeout(finish, 60_000).unref();
    pump();
  });
}

/** Each face on a fresh server: memory a previous attack left behind would hide the next one's. */
async function measure(name, run) {
  const server = await startServer();
  try {
    await measureOn(server, name, () => run(server));
  } finally {
    await server.stop();
  }
}

async function measureOn(server, name, run) {
  const before = rss(server.pid);
  let peak = before;
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rss(server.pid));
    } catch {}
  }, 20);
  const started = performance.now();
  const result = await run();
  const ms = performance.now() - started;
  clearInterval(timer);
  console.log(
    `${name.padEnd(14)} RSS +${mib(peak - before).padStart(10)} (from ${mib(before)})  answer ${result.status}` +
      `  after ${mib(result.sent)} sent, ${ms.toFixed(0)} ms`,
  );
}

const STORE_LIST = "/trove.resources.v2.StoreService/ListStores";
const grpcFrame = Buffer.from([0, 0x7f, 0xff, 0xff, 0xff]);

const h1 = (path, type, length = SIZE) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: ${length}\r\n\r\n`;

async function bodies() {
  await measure("Connect JSON", (server) => h1Flood(server.port, h1(STORE_LIST, "application/json")));
  await measure("Connect proto", (server) => h1Flood(server.port, h1(STORE_LIST, "application/proto")));
  await measure("gRPC-Web", (server) =>
    h1Flood(server.port, Buffer.concat([Buffer.from(h1(STORE_LIST, "application/grpc-web+proto")), grpcFrame])),
  );
  await measure("gRPC", (server) =>
    h2Flood(server.port, { ":path": STORE_LIST, "content-type": "application/grpc", te: "trailers" }, grpcFrame),
  );
  await measure("REST PUT", (server) =>
    h1Flood(server.port, `PUT /resources/v2/data/home/big.bin HTTP/1.1\r\nHost: x\r\nContent-Length: ${SIZE}\r\n\r\n`),
  );
  const server = await startServer();
  try {
    // Only the announcement of 1 GiB, no body: how long until an answer.
    const announce = (head) =>
      new Promise((done) => {
        const socket = net.connect(server.port, "127.0.0.1");
        const started = performance.now();
        const timer = setTimeout(() => {
          socket.destroy();
          done("(no answer within 10 s)");
        }, 10_000);
        socket.once("data", (d) => {
          clearTimeout(timer);
          socket.destroy();
          done(`${d.toString("latin1").split("\r\n")[0]} in ${(performance.now() - started).toFixed(0)} ms`);
        });
        socket.write(head);
      });
    console.log(`announce 1 GiB, Connect JSON: ${await announce(h1(STORE_LIST, "application/json", 1024 ** 3))}`);
  } finally {
    await server.stop();
  }
}

/** A bare node:http server (the baseline) answering every GET with `size` bytes, in its own process. */
async function startBaseline(size) {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      "-e",
      `const body = Buffer.alloc(${size}, 0x61);
       require("node:http").createServer((req, res) => {
         res.writeHead(200, { "content-type": "application/xml", "content-length": body.length });
         res.end(body);
       }).listen(${port}, "127.0.0.1");`,
    ],
    { stdio: ["ignore", "ignore", "ignore"] },
  );
  const url = `http://127.0.0.1:${port}/`;
  for (let i = 0; i < 100; i++) {
    try {
      await (await fetch(url)).arrayBuffer();
      break;
    } catch {}
    await sleep(50);
  }
  return { url, stop: () => child.kill("SIGKILL") };
}

const openDescriptors = (pid) => readdirSync(`/proc/${pid}/fd`).length;
const quantile = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const median = (xs) => quantile(xs, 0.5);
const ms = (x) => `${x.toFixed(2)} ms`;

/**
 * One run: GET latency of trove and of the baseline, interleaved, first without and then during
 * `n` slow or silent connections to trove that never read what the server sends (the worst
 * case: only the server can end them). The server's descriptors are sampled every 100 ms.
 */
async function slowRun(run, n, seconds) {
  const server = await startServer();
  try {
    // A 4 KiB resource: the GET of the other benchmarks (docs/benchmarks.md).
    const target = `${server.url}/resources/v2/data/home/attack-4k.bin`;
    const headers = { authorization: server.authorization };
    const put = await fetch(target, { method: "PUT", headers, body: Buffer.alloc(4096, 0x61) });
    if (put.status !== 201) throw new Error(`PUT answered ${put.status}`);
    const size = (await (await fetch(target, { headers })).arrayBuffer()).byteLength;
    const baseline = await startBaseline(size);
    try {
      const time = async (url, init) => {
        const started = performance.now();
        try {
          const r = await fetch(url, init);
          await r.arrayBuffer();
          return r.status === 200 ? performance.now() - started : Number.POSITIVE_INFINITY;
        } catch {
          return Number.POSITIVE_INFINITY;
        }
      };
      const sample = async (until, into) => {
        while (Date.now() < until) {
          into.trove.push(await time(target, { headers }));
          into.base.push(await time(baseline.url));
          await sleep(50);
        }
      };
      const load = [loadavg()[0]];
      await sample(Date.now() + 300, { trove: [], base: [] }); // warm-up
      const quiet = { trove: [], base: [] };
      await sample(Date.now() + 5000, quiet);

      const idle = openDescriptors(server.pid);
      const sockets = [];
      for (let i = 0; i < n; i++) {
        const s = net.connect(server.port, "127.0.0.1");
        s.on("error", () => {});
        const kind = i % 4;
        if (kind === 1) s.write("GET /resources/v2/data/home/ HTTP/1.1\r\nHost: x\r\n");
        if (kind === 2) s.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        if (kind === 3) s.write("G");
        sockets.push(s);
      }
      const attackStart = Date.now();
      // Slowloris: a byte of header every second on a quarter of them.
      const drip = setInterval(() => {
        for (let i = 1; i < sockets.length; i += 4) if (!sockets[i].destroyed) sockets[i].write("X");
      }, 1000);
      // When the server's open descriptors first fell to each level: idle + 150, + 100, + 50, + 0.
      let peak = 0;
      const fell = new Map();
      const watch = setInterval(() => {
        try {
          const open = openDescriptors(server.pid) - idle;
          peak = Math.max(peak, open);
          for (const level of [150, 100, 50, 0])
            if (open <= level && peak >= n * 0.9 && !fell.has(level)) fell.set(level, Date.now() - attackStart);
        } catch {}
      }, 100);
      const during = { trove: [], base: [] };
      await sample(attackStart + seconds * 1000, during);
      clearInterval(drip);
      clearInterval(watch);
      load.push(loadavg()[0]);
      const still = openDescriptors(server.pid) - idle;
      for (const s of sockets) s.destroy();
      const steps = [...fell].map(([level, t]) => `${level} left at ${(t / 1000).toFixed(1)} s`).join(", ");
      console.log(
        `run ${run}: GET ${size} B, trove median ${ms(median(quiet.trove))} (p99 ${ms(quantile(quiet.trove, 0.99))}, ${quiet.trove.length}) → ` +
          `during ${ms(median(during.trove))} (p99 ${ms(quantile(during.trove, 0.99))}, ${during.trove.length}); ` +
          `baseline ${ms(median(quiet.base))} (p99 ${ms(quantile(quiet.base, 0.99))}) → ${ms(median(during.base))} ` +
          `(p99 ${ms(quantile(during.base, 0.99))}); failed ${during.trove.filter((x) => x === Number.POSITIVE_INFINITY).length}; ` +
          `load ${load.map((x) => x.toFixed(2)).join(" → ")}`,
      );
      console.log(
        `       server descriptors: idle ${idle}, +${peak} with the attack; ${steps || "none closed"}; ${Math.max(0, still)} still open after ${seconds} s`,
      );
    } finally {
      baseline.stop();
    }
  } finally {
    await server.stop();
  }
}

async function slow() {
  const n = Number(opts.slow);
  const seconds = Number(opts["slow-seconds"]);
  console.log(
    `${n} slow connections against defaults + ${positionals.join(" ") || "no extra flags"}, ${cpus().length} CPUs`,
  );
  for (let run = 1; run <= Number(opts.runs); run++) await slowRun(run, n, seconds);
}

if (opts.only !== "slow") await bodies();
if (opts.only !== "bodies") await slow();
