// A bare server answering a 4 KiB GET one way (issue 32, session 14): the child of
// bench/response-head.js. `node bench/response-head-server.js PORT VARIANT [WORK_US]`, variants:
//   node          bare node:http's answer as bench/baseline-server.js gives it (3 headers, writeHead)
//   trove-object  Trove's response head (its header names and sizes) from writeHead(status, object)
//   trove-set     the same head from one setHeader per header, then end(body)
//   trove-array   the same head from writeHead(status, [name, value, ...])
//   trove-raw     not node:http: one socket write per request of the whole answer, pre-concatenated
//                 (Trove's head with Date, Connection and Keep-Alive, then the body): the floor
//   node-raw      the same with node:http's head
//   node-work     the `node` answer after WORK_US microseconds of synchronous work (a fixed loop
//                 calibrated at start): does a slower answer cost more than its own work?

import * as http from "node:http";
import * as net from "node:net";
import { BODY_4K, ETAG_4K } from "./payloads.js";

const [port, variant, workArg] = process.argv.slice(2);

const LAST_MODIFIED = new Date(Date.UTC(2026, 10, 28, 4, 7, 38)).toUTCString();
/** Trove's head of a 4 KiB GET (measured: 359 bytes with Date, Connection and Keep-Alive). */
const troveHeaders = (id) => ({
  Server: "resources/1.0",
  ETag: '"vG3zjN6CnTCK"',
  "Last-Modified": LAST_MODIFIED,
  "Last-Modified-Millis": "1795838858161",
  "Content-MD5": "E54DTHKohDAAEozKZuT22Q==",
  "Content-Type": "application/octet-stream",
  "Content-Length": "4096",
  "X-Request-Id": id,
});
let counter = 0;
const nextId = () => `0df68785-${(++counter).toString(36)}`;

/** A fixed amount of work, calibrated once to about `us` microseconds of CPU. */
function calibratedWork(us) {
  let sink = 0;
  const spin = (n) => {
    let x = sink;
    for (let i = 0; i < n; i++) x = (x * 1103515245 + 12345) >>> 0;
    sink = x;
  };
  const n = 1_000_000;
  spin(n);
  const t0 = process.cpuUsage();
  spin(n);
  const { user, system } = process.cpuUsage(t0);
  const perIteration = (user + system) / n;
  const iterations = Math.round(us / perIteration);
  return () => spin(iterations);
}

function answer(res, work) {
  work?.();
  res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": BODY_4K.length, ETag: ETAG_4K });
  res.end(BODY_4K);
}

const handlers = {
  node: (_req, res) => answer(res),
  "node-work": () => {
    const work = calibratedWork(Number(workArg ?? 50));
    return (_req, res) => answer(res, work);
  },
  "trove-object": (_req, res) => {
    // As Trove does: the headers' object, then writeHead's copy with the request id.
    const { "X-Request-Id": id, ...rest } = troveHeaders(nextId());
    res.writeHead(200, { ...rest, "X-Request-Id": id });
    res.end(BODY_4K);
  },
  "trove-set": (_req, res) => {
    for (const [name, value] of Object.entries(troveHeaders(nextId()))) res.setHeader(name, value);
    res.end(BODY_4K);
  },
  "trove-array": (_req, res) => {
    const h = troveHeaders(nextId());
    res.writeHead(200, [
      "Server",
      h.Server,
      "ETag",
      h.ETag,
      "Last-Modified",
      h["Last-Modified"],
      "Last-Modified-Millis",
      h["Last-Modified-Millis"],
      "Content-MD5",
      h["Content-MD5"],
      "Content-Type",
      h["Content-Type"],
      "Content-Length",
      h["Content-Length"],
      "X-Request-Id",
      h["X-Request-Id"],
    ]);
    res.end(BODY_4K);
  },
};

/** One write of the whole answer per request (requests without a body: one per blank line). */
function rawServer(head) {
  return net.createServer((socket) => {
    socket.setNoDelay(true);
    let tail = "";
    socket.on("data", (chunk) => {
      const text = tail + chunk.toString("latin1");
      let at = 0;
      for (let end = text.indexOf("\r\n\r\n", at); end >= 0; end = text.indexOf("\r\n\r\n", at)) {
        at = end + 4;
        socket.write(Buffer.concat([Buffer.from(head(), "latin1"), BODY_4K]));
      }
      tail = text.slice(at);
    });
    socket.on("error", () => socket.destroy());
  });
}

const date = () => new Date().toUTCString();
const rawHeads = {
  "trove-raw": () =>
    `HTTP/1.1 200 OK\r\n${Object.entries(troveHeaders(nextId()))
      .map(([n, v]) => `${n}: ${v}\r\n`)
      .join("")}Date: ${date()}\r\nConnection: keep-alive\r\nKeep-Alive: timeout=15\r\n\r\n`,
  "node-raw": () =>
    `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 4096\r\nETag: ${ETAG_4K}\r\nDate: ${date()}\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n`,
};

let server;
if (rawHeads[variant]) server = rawServer(rawHeads[variant]);
else {
  let handler = handlers[variant];
  if (!handler) throw new Error(`unknown variant ${variant}`);
  if (variant === "node-work") handler = handler();
  server = http.createServer({ requestTimeout: 0 }, handler);
}
server.listen(Number(port), "127.0.0.1");
process.once("SIGTERM", () => {
  server.closeAllConnections?.();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
});
