// Where a push's wall time goes (issue 31 item 3): the server's CPU (user + system, from
// /proc/PID/stat) during `trove push` of the bench tree against its wall time, and the client's.
// A server busy for the whole push is what the upload waits for; a server mostly idle says the
// time is spent waiting elsewhere (round trips, fsync, the client).
//
// `--workers N` runs `trove serve --workers N` (development token) instead of the one-process
// server without authentication; the server's CPU is that of its process and its workers.
//
// `node bench/push-server-cpu.js [--rounds 2] [--transfers 16] [--folders 100] [--files 100] [--workers N]`

import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startTrove } from "./servers.js";
import { makeTree, timed } from "./transfer-tree.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "2" },
    transfers: { type: "string", default: "16" },
    folders: { type: "string", default: "100" },
    files: { type: "string", default: "100" },
    workers: { type: "string" },
  },
});

/** A process's parent and CPU seconds so far (user + system), from /proc/PID/stat. */
function statOf(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  // After "pid (comm) ": state, ppid, ...; utime and stime are the 12th and 13th.
  return { ppid: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / 100 };
}

/** CPU seconds of a process and of its descendants alive now. */
function cpuOf(pid) {
  const stats = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      stats.set(Number(name), statOf(name));
    } catch {
      // gone meanwhile
    }
  }
  let total = 0;
  const tree = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [p, st] of stats) {
      if (!tree.has(p) && tree.has(st.ppid)) {
        tree.add(p);
        grew = true;
      }
    }
  }
  for (const p of tree) total += stats.get(p)?.cpu ?? 0;
  return total;
}

const work = mkdtempSync(join(tmpdir(), "trove-push-cpu-"));
const source = join(work, "source");
makeTree(source, Number(values.folders), Number(values.files));
try {
  for (let round = 1; round <= Number(values.rounds); round++) {
    const server = await startTrove(values.workers ? { workers: values.workers } : { auth: "off" });
    try {
      const env = {
        TROVE_URL: server.url,
        HOME: work,
        XDG_CONFIG_HOME: join(work, ".config"),
        TROVE_DATA: join(work, "none"),
        ...(server.authorization ? { TROVE_TOKEN: server.authorization.slice("Bearer ".length) } : {}),
      };
      const before = cpuOf(server.pid);
      const args = [join(ROOT, "sdk/bin/trove.js"), "push", "-q", source, "home/tree", "--transfers", values.transfers];
      const r = timed(process.execPath, args, env);
      const serverCpu = cpuOf(server.pid) - before;
      console.log(
        `round ${round}, workers ${values.workers ?? "none (auth off)"}: push ${r.wall.toFixed(2)} s; server CPU ${serverCpu.toFixed(2)} s (${((100 * serverCpu) / r.wall).toFixed(0)} % of the wall); client CPU ${r.cpu.toFixed(2)} s; load ${loadavg()[0].toFixed(1)}`,
      );
    } finally {
      await server.stop();
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
