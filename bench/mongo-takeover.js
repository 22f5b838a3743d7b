// Time for another instance to take over a store whose write lease is held by an instance that
// died (issue 11, item 5). An instance's death, as the database sees it: it took the store's
// lease (a ticket, then the announcement on the store document) and then neither renewed nor
// released it. Measured: how long a write of a second instance to that store takes from that
// moment (it waits for the lease to run out), median and worst over the rounds; and, for
// comparison, the same write with the lease free.
// `node bench/mongo-takeover.js --mongodb-url mongodb://127.0.0.1:27017/ [--rounds 20] [--lease 5000] [--skip-build]`

import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { MongoClient } from "mongodb";
import { buildDist } from "./servers.js";

const { values: opts } = parseArgs({
  options: {
    "mongodb-url": { type: "string" },
    rounds: { type: "string", default: "20" },
    lease: { type: "string" },
    "skip-build": { type: "boolean", default: false },
  },
});
const URL = opts["mongodb-url"] ?? process.env.TROVE_TEST_MONGODB_URL;
if (!URL) {
  console.error("needs --mongodb-url (or TROVE_TEST_MONGODB_URL)");
  process.exit(2);
}
const ROUNDS = Number(opts.rounds);

if (!opts["skip-build"]) buildDist();
const { MongoStorage, DEFAULT_LEASE } = await import("../dist/storage/mongodb/mongo-storage.js");
const { StoreLeases } = await import("../dist/storage/mongodb/mongo-store-lease.js");
const LEASE = Number(opts.lease ?? DEFAULT_LEASE);

async function* once(text) {
  yield Buffer.from(text);
}

function summary(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const median = sorted[Math.floor((sorted.length - 1) / 2)];
  return `median ${Math.round(median)} ms, worst ${Math.round(sorted[sorted.length - 1])} ms (n=${values.length})`;
}

const database = `trove-bench-takeover-${randomUUID().slice(0, 8)}`;
const survivor = await MongoStorage.open({ url: URL, database, lease: LEASE });
const raw = new MongoClient(URL);
await raw.connect();
const takeover = [];
const free = [];
try {
  const now = Date.now();
  await survivor.createStore({ name: "s", type: "recursive", settings: {} }, now);
  for (let round = 0; round < ROUNDS; round++) {
    // The lease free: one write's own cost.
    let blob = await survivor.writeBlob(once(`free ${round}`), { maxSize: 1024 });
    let started = performance.now();
    await survivor.putFile("s", `free-${round}.txt`, blob, "text/plain", {}, Date.now());
    free.push(performance.now() - started);

    // A dead holder: the lease taken by another "instance" (its own client), never renewed or released.
    const dead = new StoreLeases(raw.db(database), { lease: LEASE, lockTimeout: 10_000 });
    await dead.acquire("s");
    blob = await survivor.writeBlob(once(`after ${round}`), { maxSize: 1024 });
    started = performance.now();
    await survivor.putFile("s", `after-${round}.txt`, blob, "text/plain", {}, Date.now());
    takeover.push(performance.now() - started);
  }
  console.log(`MongoDB at ${URL}, lease ${LEASE} ms, ${ROUNDS} rounds`);
  console.log(`write with the lease free:                 ${summary(free)}`);
  console.log(`write after the holder died (lease taken): ${summary(takeover)}`);
} finally {
  await survivor.dropDatabase().catch(() => {});
  await survivor.close();
  await raw.close();
}
