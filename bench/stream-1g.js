// Streaming benchmark: PUT then GET of a 1 GiB resource generated on the fly,
// against Trove and against a bare node:http server that streams to and from a
// file (with MD5 and fsync), reporting MiB/s and the server's peak RSS growth.
// `node bench/stream-1g.js [--size-mib 1024] [--skip-build]`.

import { createHash } from "node:crypto";
import * as http from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { generatedBody } from "./payloads.js";
import { buildDist, procStatusBytes, resetPeak, startBaseline, startTrove } from "./servers.js";

const MiB = 1024 * 1024;
/** The target of DESIGN.md: memory does not grow with a resource's size. */
const GROWTH_TARGET = 100 * MiB;
/** Headers every request to the server under test carries (its bearer token). */
let auth = {};

function put(url, source, length) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: "PUT",
      headers: { "Content-Length": length, "Content-Type": "application/octet-stream", ...auth },
    });
    req.once("response", (res) => {
      res.resume();
      res.once("end", () => resolve(res));
    });
    req.once("error", reject);
    pipeline(Readable.from(source), req).catch(reject);
  });
}

function get(url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: auth }, (res) => {
        const hash = createHash("md5");
        let size = 0;
        res.on("data", (chunk) => {
          size += chunk.length;
          hash.update(chunk);
        });
        res.once("end", () => resolve({ res, size, md5: hash.digest("base64") }));
        res.once("error", reject);
      })
      .once("error", reject);
  });
}

/** Runs a transfer while sampling the server's RSS; answers its duration and the peak growth over `before`. */
async function measured(pid, transfer) {
  const before = procStatusBytes(pid, "VmRSS");
  const kernelPeak = resetPeak(pid);
  let peak = before;
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, procStatusBytes(pid, "VmRSS"));
    } catch {}
  }, 50);
  const started = performance.now();
  try {
    const result = await transfer();
    const seconds = (performance.now() - started) / 1000;
    if (kernelPeak) peak = Math.max(peak, procStatusBytes(pid, "VmHWM"));
    return { result, seconds, growth: peak - before, before };
  } finally {
    clearInterval(timer);
  }
}

async function roundTrip(server, path, sizeMiB) {
  const url = server.url + path;
  auth = server.authorization ? { Authorization: server.authorization } : {};
  // Warm the large-body code paths first so the growth measured is not start-up.
  const warm = generatedBody(4 * MiB);
  await put(url, warm.chunks, 4 * MiB);
  await get(url);

  const size = sizeMiB * MiB;
  const body = generatedBody(size);
  const up = await measured(server.pid, () => put(url, body.chunks, size));
  const md5 = body.md5();
  if (up.result.statusCode !== 201 && up.result.statusCode !== 200)
    throw new Error(`PUT answered ${up.result.statusCode}`);
  if (up.result.headers["content-md5"] !== md5)
    throw new Error(`PUT Content-MD5 ${up.result.headers["content-md5"]}, sent ${md5}`);
  const down = await measured(server.pid, () => get(url));
  if (down.result.res.statusCode !== 200) throw new Error(`GET answered ${down.result.res.statusCode}`);
  if (down.result.size !== size || down.result.md5 !== md5)
    throw new Error("GET answered other contents than were PUT");
  return { up, down };
}

export async function runStream({ sizeMiB = 1024 } = {}) {
  const rows = [];
  const baseline = await startBaseline();
  try {
    rows.push({ server: "node:http + file baseline", ...(await roundTrip(baseline, "/file/large.bin", sizeMiB)) });
  } finally {
    await baseline.stop();
  }
  const trove = await startTrove({ logLevel: "silent" });
  try {
    rows.push({
      server: "trove, log silent",
      ...(await roundTrip(trove, "/resources/v2/data/home/large.bin", sizeMiB)),
    });
  } finally {
    await trove.stop();
  }

  const mibps = (t) => (sizeMiB / t.seconds).toFixed(0);
  const mib = (b) => (b / MiB).toFixed(1);
  console.log(
    `\nStreaming ${sizeMiB} MiB (MD5 checked both ways; server RSS growth target < ${GROWTH_TARGET / MiB} MiB)`,
  );
  const head = `${"server".padEnd(28)}${"PUT MiB/s".padStart(10)}${"GET MiB/s".padStart(10)}${"RSS before".padStart(12)}${"PUT growth".padStart(12)}${"GET growth".padStart(12)}`;
  console.log(`${head}\n${"-".repeat(head.length)}`);
  for (const r of rows) {
    console.log(
      `${r.server.padEnd(28)}${mibps(r.up).padStart(10)}${mibps(r.down).padStart(10)}${`${mib(r.up.before)} MiB`.padStart(12)}${`${mib(r.up.growth)} MiB`.padStart(12)}${`${mib(r.down.growth)} MiB`.padStart(12)}`,
    );
  }
  const trovesRow = rows.at(-1);
  const ok = trovesRow.up.growth < GROWTH_TARGET && trovesRow.down.growth < GROWTH_TARGET;
  console.log(
    `Trove vs baseline: PUT ${(rows[0].up.seconds / trovesRow.up.seconds).toFixed(2)}x, GET ${(rows[0].down.seconds / trovesRow.down.seconds).toFixed(2)}x; memory target ${ok ? "met" : "MISSED"}`,
  );
  return rows;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { values } = parseArgs({
    options: { "size-mib": { type: "string", default: "1024" }, "skip-build": { type: "boolean", default: false } },
  });
  if (!values["skip-build"]) buildDist();
  await runStream({ sizeMiB: Number(values["size-mib"]) });
}
