// The baseline: a bare node:http server doing the least that each benchmark
// case needs. `node bench/baseline-server.js PORT DIR`.
//   GET  /...        the same 4 KiB as Trove serves, with an ETag; 304 when If-None-Match matches
//   PUT  /...        consumes the body, answers 201
//   PUT  /file/NAME  streams the body to DIR/NAME with its MD5, fsyncs, answers 201 with Content-MD5
//   GET  /file/NAME  streams DIR/NAME back
//   PUT  /resources/v2/data/home/NAME   consumes the body, appends a change to an in-memory
//        feed and answers the parked polls it wakes, then answers 201 (the feed baseline)
//   GET  /resources/v2/poll?store=home:N&wait=S   the changes after N as Trove's poll lines
//        (`CHANGE|id|uri`), or parks until one comes or S seconds pass; without `store`,
//        `RESET home LAST`. Nothing persisted: the least a change feed can do on node:http.

import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { open, stat } from "node:fs/promises";
import * as http from "node:http";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { BODY_4K, ETAG_4K } from "./payloads.js";

const [port, dir] = process.argv.slice(2);

async function putFile(req, res, file) {
  const hash = createHash("md5");
  await pipeline(
    req,
    async function* (source) {
      for await (const chunk of source) {
        hash.update(chunk);
        yield chunk;
      }
    },
    createWriteStream(file),
  );
  const handle = await open(file, "r+");
  await handle.sync();
  await handle.close();
  res.writeHead(201, { "Content-MD5": hash.digest("base64"), "Content-Length": 0 });
  res.end();
}

async function getFile(res, file) {
  const { size } = await stat(file);
  res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": size });
  await pipeline(createReadStream(file, { highWaterMark: 64 * 1024 }), res);
}

/** The feed baseline: the last 10,000 changes in memory, and the polls parked for the next one. */
const changes = [];
let lastId = 0;
const parked = new Set();

/** The changes after `since`: ids are consecutive, so they are the last `lastId - since` kept. */
function changeLines(since) {
  let lines = "";
  for (let i = Math.max(0, changes.length - (lastId - since)); i < changes.length; i++) {
    lines += `CHANGE|${changes[i].id}|${changes[i].uri}\n`;
  }
  return lines;
}

function answerPoll(req, res) {
  const query = new URL(req.url, "http://x").searchParams;
  const store = query.get("store");
  if (store === null) {
    res.writeHead(200, { "Content-Type": "text/plain" }).end(`RESET home ${lastId}\n`);
    return;
  }
  const since = Number(store.slice(store.indexOf(":") + 1));
  if (lastId > since) {
    res.writeHead(200, { "Content-Type": "text/plain" }).end(changeLines(since));
    return;
  }
  const poll = { res, since };
  poll.timer = setTimeout(
    () => {
      parked.delete(poll);
      res.writeHead(200, { "Content-Type": "text/plain" }).end("");
    },
    Number(query.get("wait") ?? 30) * 1000,
  );
  parked.add(poll);
  res.once("close", () => {
    clearTimeout(poll.timer);
    parked.delete(poll);
  });
}

function recordChange(req, res) {
  req.resume();
  req.once("end", () => {
    changes.push({ id: ++lastId, uri: `idr://home/${req.url.slice("/resources/v2/data/home/".length)}` });
    if (changes.length > 10_000) changes.shift();
    for (const poll of parked) {
      clearTimeout(poll.timer);
      parked.delete(poll);
      poll.res.writeHead(200, { "Content-Type": "text/plain" }).end(changeLines(poll.since));
    }
    res.writeHead(201, { "Content-Length": 0 });
    res.end();
  });
}

const server = http.createServer({ requestTimeout: 0 }, (req, res) => {
  if (req.url.startsWith("/resources/v2/poll")) {
    answerPoll(req, res);
    return;
  }
  if (req.method === "PUT" && req.url.startsWith("/resources/v2/data/home/")) {
    recordChange(req, res);
    return;
  }
  if (req.url.startsWith("/file/")) {
    const file = join(dir, req.url.slice(6).replace(/[^\w.-]/g, "_"));
    const done = req.method === "PUT" ? putFile(req, res, file) : getFile(res, file);
    done.catch((err) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
      else res.destroy(err);
    });
    return;
  }
  if (req.method === "PUT") {
    req.resume();
    req.once("end", () => {
      res.writeHead(201, { ETag: ETAG_4K, "Content-Length": 0 });
      res.end();
    });
    return;
  }
  if (req.headers["if-none-match"] === ETAG_4K) {
    res.writeHead(304, { ETag: ETAG_4K });
    res.end();
    return;
  }
  res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": BODY_4K.length, ETag: ETAG_4K });
  res.end(req.method === "HEAD" ? undefined : BODY_4K);
});

server.listen(Number(port), "127.0.0.1");
process.once("SIGTERM", () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
