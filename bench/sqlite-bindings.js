// A GET's read, alone: getStoreNode's statement (the store's configuration and the node with its
// 4 KiB inline contents, one statement) on a file-backed database set up as SqliteStorage sets it
// up (exclusive locking, WAL, synchronous NORMAL), 1,000 resources, by better-sqlite3 (the one
// installed) and node:sqlite (Node.js 22.13 and later), each with the join that takes the key as
// bound parameters (Trove before issue 26) and with the key as a one-row table (today). Prints µs
// per read, the median of the rounds. `node bench/sqlite-bindings.js [--reads 200000 --rounds 5]`
// (docs/benchmarks.md, "Node.js lines and the SQLite binding").

import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { median, pad } from "./report.js";

const { values: opts } = parseArgs({
  options: { reads: { type: "string", default: "200000" }, rounds: { type: "string", default: "5" } },
});
const reads = Number(opts.reads);
const rounds = Number(opts.rounds);
const require = createRequire(import.meta.url);

const SCHEMA = `
CREATE TABLE stores (name TEXT PRIMARY KEY, type TEXT NOT NULL, settings TEXT NOT NULL, deleted INTEGER NOT NULL DEFAULT 0,
  last_event_id INTEGER NOT NULL DEFAULT 0, purged_event_id INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL, modified INTEGER NOT NULL);
CREATE TABLE nodes (store TEXT NOT NULL, path TEXT NOT NULL, parent TEXT, directory INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0,
  tag TEXT NOT NULL, prev_tag TEXT NOT NULL DEFAULT '', type TEXT NOT NULL DEFAULT '', size INTEGER NOT NULL DEFAULT 0,
  md5 TEXT NOT NULL DEFAULT '', blob TEXT NOT NULL DEFAULT '', inline BLOB, created INTEGER NOT NULL, modified INTEGER NOT NULL,
  event_id INTEGER NOT NULL, UNIQUE (store, path));
CREATE INDEX nodes_children ON nodes (store, parent, path);
CREATE INDEX nodes_events ON nodes (store, event_id);
CREATE INDEX nodes_tombstones ON nodes (deleted, modified) WHERE deleted = 1;`;
const COLUMNS =
  "s.type, s.settings, n.directory, n.deleted, n.tag, n.prev_tag, n.type, n.size, n.md5, n.blob, n.inline, n.created, n.modified, n.event_id";
const QUERIES = {
  "join on parameters": `SELECT ${COLUMNS} FROM stores s LEFT JOIN nodes n ON n.store = s.name AND n.path = ? WHERE s.name = ? AND s.deleted = 0`,
  "key as a table": `WITH k(path, store) AS (VALUES (?, ?)) SELECT ${COLUMNS} FROM k JOIN stores s ON s.name = k.store LEFT JOIN nodes n ON n.store = s.name AND n.path = k.path WHERE s.deleted = 0`,
};

/** { exec, prepare(sql) -> get(...args) returning an array, close, version } for one binding. */
async function open(binding, file) {
  if (binding === "better-sqlite3") {
    const Database = require("better-sqlite3");
    const db = new Database(file);
    return {
      version: `better-sqlite3 ${require("better-sqlite3/package.json").version}`,
      exec: (sql) => db.exec(sql),
      prepare: (sql) => {
        const s = db.prepare(sql).raw(true);
        return (...args) => s.get(...args);
      },
      run: (sql, ...args) => db.prepare(sql).run(...args),
      close: () => db.close(),
    };
  }
  const { DatabaseSync } = await import("node:sqlite");
  const db = new DatabaseSync(file);
  return {
    version: "node:sqlite",
    exec: (sql) => db.exec(sql),
    prepare: (sql) => {
      const s = db.prepare(sql);
      // setReturnArrays: Node.js 24; arrays as better-sqlite3's raw rows, where it exists.
      if (typeof s.setReturnArrays === "function") s.setReturnArrays(true);
      return (...args) => s.get(...args);
    },
    run: (sql, ...args) => db.prepare(sql).run(...args),
    close: () => db.close(),
  };
}

const bindings = ["better-sqlite3"];
try {
  await import("node:sqlite");
  bindings.push("node:sqlite");
} catch {
  // Node.js before 22.13 without --experimental-sqlite
}

process.stdout.write(`Node.js ${process.version}, ${reads} reads a round, ${rounds} rounds, µs per read (median):\n`);
for (const binding of bindings) {
  const dir = mkdtempSync(join(tmpdir(), "trove-sqlite-bindings-"));
  const db = await open(binding, join(dir, "trove.db"));
  try {
    db.exec("PRAGMA locking_mode = EXCLUSIVE");
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec(SCHEMA);
    db.run("INSERT INTO stores (name, type, settings, created, modified) VALUES ('home', 'recursive', '{}', 1, 1)");
    db.exec("BEGIN");
    const body = Buffer.alloc(4096, 97);
    for (let i = 0; i < 1000; i++) {
      db.run(
        "INSERT INTO nodes (store, path, parent, directory, tag, type, size, md5, blob, inline, created, modified, event_id) VALUES ('home', ?, 'd', 0, 't', 'application/json', 4096, 'm', 'b', ?, 1, 1, ?)",
        `d/f${i}`,
        body,
        i + 1,
      );
    }
    db.exec("COMMIT");
    for (const [name, sql] of Object.entries(QUERIES)) {
      const get = db.prepare(sql);
      const row = get("d/f1", "home");
      if (!row || Object.values(row)[4] !== "t")
        throw new Error(`${binding} ${name}: unexpected row ${JSON.stringify(row)}`);
      const perRead = [];
      for (let r = 0; r < rounds; r++) {
        const start = process.hrtime.bigint();
        for (let i = 0; i < reads; i++) get(`d/f${i % 1000}`, "home");
        perRead.push(Number(process.hrtime.bigint() - start) / reads / 1000);
      }
      process.stdout.write(
        `${pad(db.version, 22)} ${pad(name, 20)} ${pad(median(perRead).toFixed(2), 7, true)} µs  (rounds: ${perRead.map((x) => x.toFixed(2)).join(", ")})\n`,
      );
    }
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
