// The SDK's client CPU per small GET over h2c (issue 31): what `trove pull` and a first
// `trove mirror --once` spend on each file's request before writing it. One `trove serve`
// (embedded store, development-issuer token), 3,000 files of 4 KiB; each round reads all of them
// 16 at once through TroveRestClient.get(..., { as: "stream" }) on createH2cFetch, and the body
// to its end; CPU is this process's user + system time over the GETs (process.cpuUsage). Beside
// it, in the same run, the floor: the same GETs as bare node:http2 requests on one session.
//
// `node bench/client-get.js [--roots DIR[,DIR...]] [--rounds 6] [--files 3000]`: with several
// checkouts (each built: sdk/dist), their SDKs take turns, round by round, against one server.

import * as http2 from "node:http2";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startTrove } from "./servers.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const { values } = parseArgs({
  options: {
    roots: { type: "string", default: ROOT },
    rounds: { type: "string", default: "6" },
    files: { type: "string", default: "3000" },
  },
});
const roots = values.roots.split(",");
const ROUNDS = Number(values.rounds);
const N = Number(values.files);
const CONCURRENCY = 16;

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

const server = await startTrove();
try {
  const token = server.authorization.slice("Bearer ".length);
  const sdks = [];
  for (const root of roots) {
    const { createRestClient, createH2cFetch } = await import(join(root, "sdk/dist/rest/index.js"));
    const { eachLimited } = await import(join(root, "sdk/dist/rest/in-flight.js"));
    sdks.push({ root, createRestClient, createH2cFetch, eachLimited });
  }
  const { eachLimited } = sdks[0];
  const indexes = [...Array(N).keys()];
  {
    const { createRestClient, createH2cFetch } = sdks[0];
    const h2c = createH2cFetch(server.url);
    const rest = createRestClient({ baseUrl: server.url, auth: token, fetch: h2c });
    await rest.mkdir("home", "bench");
    const body = Buffer.alloc(4096, "x");
    await eachLimited(indexes, CONCURRENCY, (i) => rest.put("home", `bench/f${i}.txt`, body));
    h2c.close();
  }
  /** CPU (µs) per GET of `get` over every file, after 200 of them to warm up. */
  const measure = async (get) => {
    await eachLimited(indexes.slice(0, 200), CONCURRENCY, get);
    const before = process.cpuUsage();
    await eachLimited(indexes, CONCURRENCY, get);
    const used = process.cpuUsage(before);
    return (used.user + used.system) / N;
  };
  const results = new Map([...roots.map((r) => [r, []]), ["node:http2", []]]);
  for (let round = 0; round < ROUNDS; round++) {
    for (const sdk of round % 2 ? [...sdks].reverse() : sdks) {
      const h2c = sdk.createH2cFetch(server.url);
      const rest = sdk.createRestClient({ baseUrl: server.url, auth: token, fetch: h2c });
      const us = await measure(async (i) => {
        const got = await rest.get("home", `bench/f${i}.txt`, { as: "stream" });
        for await (const _ of got.body);
      });
      h2c.close();
      results.get(sdk.root).push(us);
      console.log(`round ${round} ${sdk.root}: ${us.toFixed(1)} µs per GET`);
    }
    const session = http2.connect(server.url);
    const us = await measure(
      (i) =>
        new Promise((resolve, reject) => {
          const stream = session.request({
            ":path": `/resources/v2/data/home/bench/f${i}.txt`,
            authorization: server.authorization,
          });
          stream.on("data", () => {});
          stream.on("end", resolve);
          stream.on("error", reject);
        }),
    );
    session.close();
    results.get("node:http2").push(us);
    console.log(`round ${round} node:http2: ${us.toFixed(1)} µs per GET`);
  }
  const floor = median(results.get("node:http2"));
  for (const [name, runs] of results) {
    const m = median(runs);
    console.log(`median ${name}: ${m.toFixed(1)} µs per GET (${(m / floor).toFixed(2)}x node:http2)`);
  }
} finally {
  await server.stop();
}
