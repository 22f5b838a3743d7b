// gRPC Read/Write of a large resource against REST GET/PUT of the same one, through one `trove serve`
// (token auth, logging at info to /dev/null): REST over HTTP/1.1 (node:http), gRPC over HTTP/2
// through the SDK's createTroveClient (what users get: its 8 MiB / 16 MiB receive windows), the
// Connect protocol's Read over HTTP/2 through the SDK, and a gRPC Read through connect-node's
// createGrpcTransport with its defaults (64 KiB windows) for comparison. Rounds alternate the faces
// so that the load of whatever else runs on the machine falls on all of them alike; MD5 is checked
// both ways; the server's CPU (utime + stime) and the client's are counted per operation.
// `node bench/grpc-large.js [--size-mib 20] [--rounds 5] [--skip-build]` (issue 14).

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import * as http from "node:http";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { generatedBody } from "./payloads.js";
import { cpuSeconds, median } from "./report.js";
import { buildDist, procStatusBytes, startTrove } from "./servers.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
/**
 * The SDK compiled for the benchmark, apart from sdk/dist (which the SDK's tests build under their
 * own lock); under node_modules so that its imports resolve to the root's packages.
 */
const SDK_OUT = join(ROOT, "node_modules/.cache/trove-bench/sdk");

function buildSdk() {
  const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", "sdk/tsconfig.json", "--outDir", SDK_OUT, "--declaration", "false"], {
    cwd: ROOT,
    stdio: "inherit",
  });
}

const MiB = 1024 * 1024;
/** The target of issue 14: gRPC within this factor of REST. */
const TARGET_RATIO = 1.2;

function restPut(url, authorization, source, length) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: "PUT",
      headers: { "Content-Length": length, "Content-Type": "application/octet-stream", Authorization: authorization },
    });
    req.once("response", (res) => {
      res.resume();
      res.once("end", () => resolve(res));
    });
    req.once("error", reject);
    pipeline(Readable.from(source), req).catch(reject);
  });
}

function restGet(url, authorization) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { Authorization: authorization } }, (res) => {
        const hash = createHash("md5");
        let size = 0;
        res.on("data", (chunk) => {
          size += chunk.length;
          hash.update(chunk);
        });
        res.once("end", () => resolve({ status: res.statusCode, size, md5: hash.digest("base64") }));
        res.once("error", reject);
      })
      .once("error", reject);
  });
}

async function rpcRead(client, path) {
  const hash = createHash("md5");
  let size = 0;
  let messages = 0;
  let largest = 0;
  for await (const m of client.read({ store: "home", path })) {
    messages++;
    largest = Math.max(largest, m.chunk.length);
    size += m.chunk.length;
    hash.update(m.chunk);
  }
  return { size, md5: hash.digest("base64"), messages, largest };
}

async function rpcWrite(client, path, source, length) {
  async function* requests() {
    yield {
      part: {
        case: "header",
        value: { store: "home", path, contentType: "application/octet-stream", contentLength: BigInt(length) },
      },
    };
    for await (const chunk of source) yield { part: { case: "chunk", value: chunk } };
  }
  return client.write(requests());
}

/**
 * Runs a transfer while sampling the server's RSS; answers its seconds, the RSS peak seen, and the
 * CPU seconds the server and this client (the benchmark's process) spent meanwhile.
 */
async function measured(pid, transfer) {
  let peak = procStatusBytes(pid, "VmRSS");
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, procStatusBytes(pid, "VmRSS"));
    } catch {}
  }, 20);
  const serverCpu = cpuSeconds(pid);
  const clientCpu = process.cpuUsage();
  const started = performance.now();
  try {
    const result = await transfer();
    const seconds = (performance.now() - started) / 1000;
    const client = process.cpuUsage(clientCpu);
    return {
      result,
      seconds,
      peak,
      serverCpu: cpuSeconds(pid) - serverCpu,
      clientCpu: (client.user + client.system) / 1e6,
    };
  } finally {
    clearInterval(timer);
  }
}

export async function runGrpcLarge({ sizeMiB = 20, rounds = 5, logLevel = "info" } = {}) {
  const size = sizeMiB * MiB;
  const trove = await startTrove({ logLevel });
  try {
    const authorization = trove.authorization;
    const interceptors = [
      (next) => (req) => {
        req.header.set("Authorization", authorization);
        return next(req);
      },
    ];
    // What users get: the SDK's clients (one HTTP/2 connection each, the SDK's receive windows).
    const { createTroveClient } = await import(pathToFileURL(join(SDK_OUT, "index.js")).href);
    const token = authorization.replace(/^Bearer /, "");
    const grpcSdk = createTroveClient({ baseUrl: trove.url, auth: token, protocol: "grpc" });
    const connectSdk = createTroveClient({ baseUrl: trove.url, auth: token, protocol: "connect", httpVersion: "2" });
    const grpc = grpcSdk.resources;
    const connect = connectSdk.resources;
    // connect-node's gRPC transport with its defaults (HTTP/2 windows of 64 KiB), the same descriptors.
    const { ResourceService } = await import("../dist/gen/trove/resources/v2/resources_pb.js");
    const grpcDefaults = createClient(ResourceService, createGrpcTransport({ baseUrl: trove.url, interceptors }));
    const restUrl = (path) => `${trove.url}/resources/v2/data/home/${path}`;

    // The body is deterministic: its MD5 is known before any transfer.
    const expected = generatedBody(size);
    for await (const _ of expected.chunks);
    const md5 = expected.md5();

    const ops = {
      "REST PUT": async (path) => {
        const res = await restPut(restUrl(path), authorization, generatedBody(size).chunks, size);
        if (res.statusCode !== 201 && res.statusCode !== 200) throw new Error(`PUT answered ${res.statusCode}`);
        if (res.headers["content-md5"] !== md5) throw new Error(`PUT Content-MD5 ${res.headers["content-md5"]}`);
      },
      "gRPC Write": async (path) => {
        const out = await rpcWrite(grpc, path, generatedBody(size).chunks, size);
        if (out.resource?.md5 !== md5 || out.resource.size !== BigInt(size))
          throw new Error(`Write stored ${out.resource?.size} bytes with MD5 ${out.resource?.md5}`);
      },
      "REST GET": async (path) => {
        const got = await restGet(restUrl(path), authorization);
        if (got.status !== 200 || got.size !== size || got.md5 !== md5)
          throw new Error(`GET answered ${got.status}, ${got.size} bytes, MD5 ${got.md5}`);
      },
      "gRPC Read": async (path) => {
        const got = await rpcRead(grpc, path);
        if (got.size !== size || got.md5 !== md5) throw new Error(`Read answered ${got.size} bytes, MD5 ${got.md5}`);
        return got;
      },
      "Connect Read (h2)": async (path) => {
        const got = await rpcRead(connect, path);
        if (got.size !== size || got.md5 !== md5) throw new Error(`Read answered ${got.size} bytes, MD5 ${got.md5}`);
        return got;
      },
      "gRPC Read 64K win": async (path) => {
        const got = await rpcRead(grpcDefaults, path);
        if (got.size !== size || got.md5 !== md5) throw new Error(`Read answered ${got.size} bytes, MD5 ${got.md5}`);
        return got;
      },
    };
    const writes = ["REST PUT", "gRPC Write"];
    const reads = ["REST GET", "gRPC Read", "Connect Read (h2)", "gRPC Read 64K win"];

    // Warm every path (compiled code, sessions) before the baseline RSS is taken.
    await ops["REST PUT"]("warm-rest.bin");
    await ops["gRPC Write"]("warm-grpc.bin");
    for (const r of reads) await ops[r]("warm-rest.bin");
    const before = procStatusBytes(trove.pid, "VmRSS");

    const times = Object.fromEntries(Object.keys(ops).map((k) => [k, []]));
    const serverCpu = Object.fromEntries(Object.keys(ops).map((k) => [k, []]));
    const clientCpu = Object.fromEntries(Object.keys(ops).map((k) => [k, []]));
    let peak = Object.fromEntries(Object.keys(ops).map((k) => [k, before]));
    let shape;
    for (let round = 0; round < rounds; round++) {
      // Rotate the order each round, so no face always runs first or after the same one.
      const rotate = (list) => list.map((_, i) => list[(i + round) % list.length]);
      for (const w of rotate(writes)) {
        const m = await measured(trove.pid, () => ops[w](`large-${w.split(" ")[0].toLowerCase()}.bin`));
        times[w].push(m.seconds);
        serverCpu[w].push(m.serverCpu);
        clientCpu[w].push(m.clientCpu);
        peak = { ...peak, [w]: Math.max(peak[w], m.peak) };
      }
      for (const r of rotate(reads)) {
        const m = await measured(trove.pid, () => ops[r]("large-rest.bin"));
        times[r].push(m.seconds);
        serverCpu[r].push(m.serverCpu);
        clientCpu[r].push(m.clientCpu);
        peak = { ...peak, [r]: Math.max(peak[r], m.peak) };
        if (r === "gRPC Read") shape = m.result;
      }
      process.stderr.write(`  round ${round + 1}/${rounds} done\n`);
    }

    const med = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]));
    console.log(
      `\n${sizeMiB} MiB through one trove serve (log ${logLevel}, token auth), ${rounds} alternating rounds, medians (min-max)`,
    );
    const head = `${"face".padEnd(20)}${"median s".padStart(10)}${"min-max s".padStart(16)}${"MiB/s".padStart(8)}${"vs REST".padStart(9)}${"server CPU".padStart(12)}${"client CPU".padStart(12)}${"RSS growth".padStart(12)}`;
    console.log(`${head}\n${"-".repeat(head.length)}`);
    const rows = [];
    for (const k of [...reads, ...writes]) {
      const rest = k.includes("Read") || k === "REST GET" ? med["REST GET"] : med["REST PUT"];
      const ratio = med[k] / rest;
      const growth = peak[k] - before;
      const server = median(serverCpu[k]);
      const client = median(clientCpu[k]);
      rows.push({ face: k, median: med[k], ratio, growth, serverCpu: server, clientCpu: client });
      const range = `${Math.min(...times[k]).toFixed(3)}-${Math.max(...times[k]).toFixed(3)}`;
      console.log(
        `${k.padEnd(20)}${med[k].toFixed(3).padStart(10)}${range.padStart(16)}${(sizeMiB / med[k]).toFixed(0).padStart(8)}${`${ratio.toFixed(2)}x`.padStart(9)}${`${(server * 1000).toFixed(0)} ms`.padStart(12)}${`${(client * 1000).toFixed(0)} ms`.padStart(12)}${`${(growth / MiB).toFixed(1)} MiB`.padStart(12)}`,
      );
    }
    console.log(
      `server RSS before the rounds ${(before / MiB).toFixed(1)} MiB; gRPC Read: ${shape.messages} messages, largest chunk ${shape.largest} bytes`,
    );
    const read = med["gRPC Read"] / med["REST GET"];
    const write = med["gRPC Write"] / med["REST PUT"];
    console.log(
      `gRPC/REST: Read ${read.toFixed(2)}x, Write ${write.toFixed(2)}x; target <= ${TARGET_RATIO}x ${read <= TARGET_RATIO && write <= TARGET_RATIO ? "met" : "MISSED"}`,
    );
    grpcSdk.close();
    connectSdk.close();
    return rows;
  } finally {
    await trove.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { values } = parseArgs({
    options: {
      "size-mib": { type: "string", default: "20" },
      rounds: { type: "string", default: "5" },
      "skip-build": { type: "boolean", default: false },
    },
  });
  if (!values["skip-build"]) buildDist();
  if (!values["skip-build"] || !existsSync(join(SDK_OUT, "index.js"))) buildSdk();
  await runGrpcLarge({ sizeMiB: Number(values["size-mib"]), rounds: Number(values.rounds) });
}
