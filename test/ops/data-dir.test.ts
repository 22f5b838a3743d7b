// A data directory that cannot be used (issue 26, item 3; docs/operations.md, "Data directory";
// docs/cli.md, exit codes): `trove serve` in a child process prints one line naming the path and
// the reason, creates nothing, and exits 1 at once, also with --workers 2. Before, `--data
// /proc/nope` spun at 90 % of a core in Node's recursive mkdir (ENOENT, EEXIST, ENOENT ... for
// ever) and SIGTERM did not end it. A signal during start-up ends the process by its default
// action, also where start-up waits in a system call; a worker started again that cannot start
// ends its primary instead of being started again for ever.
//
// The tests run as root, whom file modes do not stop: a read-only file system is a tmpfs mounted
// read-only (skipped where mount(8) is not allowed), and "permission denied" is produced for a
// server running as the user nobody, and for root without CAP_DAC_OVERRIDE (setpriv).

import { type ChildProcess, execFileSync, type SpawnOptions, spawn } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, startChildServer } from "../support/child-server.js";
import { tmpfsMountable } from "../support/tmpfs.js";
import { alive, until, workerPids } from "../support/workers.js";

const CLI = fileURLToPath(new URL("../../bin/trove.js", import.meta.url));
/** Generous: "it exits" is what is asserted, never how fast (a loaded machine starts Node slowly). */
const EXIT_WITHIN = 10_000;
const ROOT = process.getuid?.() === 0;
const MOUNTABLE = tmpfsMountable();
const SETPRIV = ROOT && commandExists("setpriv");

function commandExists(name: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

interface Started {
  child: ChildProcess;
  stderr(): string;
  stdout(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children: ChildProcess[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
const workers = new Set<number>();

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await gone;
    }
  }
  for (const pid of [...workers]) {
    workers.delete(pid);
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmdline.includes("trove.js") && (await alive(pid))) process.kill(pid, "SIGKILL");
  }
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `trove-data-dir-${prefix}-`));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** `trove serve --data dataDir ...args` (`prefix`: a command that runs node, e.g. setpriv). */
async function serve(
  dataDir: string,
  args: string[] = [],
  options: SpawnOptions & { prefix?: string[] } = {},
): Promise<Started> {
  const { prefix = [], ...spawnOptions } = options;
  const argv = [
    CLI,
    "serve",
    "--host",
    "127.0.0.1",
    "--port",
    String(await freePort()),
    "--data",
    dataDir,
    "--log-level",
    "silent",
    ...args,
  ];
  const child =
    prefix.length > 0
      ? spawn(prefix[0] as string, [...prefix.slice(1), process.execPath, ...argv], {
          ...spawnOptions,
          stdio: ["ignore", "pipe", "pipe"],
        })
      : spawn(process.execPath, argv, { ...spawnOptions, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let stderr = "";
  let stdout = "";
  child.stderr?.setEncoding("utf8").on("data", (s: string) => {
    stderr += s;
  });
  child.stdout?.setEncoding("utf8").on("data", (s: string) => {
    stdout += s;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    // "close": stderr is read to its end too.
    child.once("close", (code, signal) => resolve({ code, signal })),
  );
  return { child, stderr: () => stderr, stdout: () => stdout, exited };
}

/** How the process ended, or a failure naming what it printed if it is still running after EXIT_WITHIN. */
async function ended(s: Started): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((r) => {
    timer = setTimeout(() => r("late"), EXIT_WITHIN);
  });
  const result = await Promise.race([s.exited, late]);
  clearTimeout(timer);
  if (result === "late") throw new Error(`trove serve still runs after ${EXIT_WITHIN / 1000} s: ${s.stderr()}`);
  return { ...result, stderr: s.stderr() };
}

/** Exit code 1 and exactly one line on stderr: the path and the reason. */
async function expectRefused(s: Started, path: string, reason: string): Promise<void> {
  expect(await ended(s)).toEqual({
    code: 1,
    signal: null,
    stderr: `trove serve: data directory ${path} cannot be used: ${reason}\n`,
  });
}

/** A tmpfs mounted read-only on a new directory: what a read-only file system is to root. */
async function readOnlyMount(): Promise<string> {
  const dir = await tempDir("ro");
  execFileSync("mount", ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", dir]);
  cleanups.push(() => {
    execFileSync("umount", [dir]);
  });
  return dir;
}

/** Spawn options that run the server as the user nobody (root), or as this user (its modes apply). */
const NOBODY: SpawnOptions = ROOT ? { uid: 65534, gid: 65534 } : {};

describe("serve with a data directory that cannot be used", () => {
  it("serve with --data /proc/nope exits 1 naming the path: no such file or directory, /proc does not let it be created (it spun in mkdir before)", async () => {
    await expectRefused(
      await serve("/proc/nope"),
      "/proc/nope",
      "no such file or directory (/proc does not let it be created)",
    );
    expect(existsSync("/proc/nope")).toBe(false);
  });

  it("serve with --data /proc/nope/data exits 1 naming the path: no such file or directory, its parent cannot be created", async () => {
    await expectRefused(
      await serve("/proc/nope/data"),
      "/proc/nope/data",
      "no such file or directory (its parent /proc/nope cannot be created)",
    );
    expect(existsSync("/proc/nope")).toBe(false);
  });

  it("serve with --data on a regular file exits 1 naming the path: is not a directory; the file is unchanged", async () => {
    const base = await tempDir("file");
    const file = join(base, "data");
    await writeFile(file, "not a directory\n");
    await expectRefused(await serve(file), file, "is not a directory");
    expect(await readFile(file, "utf8")).toBe("not a directory\n");
    expect(await readdir(base)).toEqual(["data"]);
  });

  it("serve with --data below a regular file exits 1 naming the path: the file is not a directory; nothing created", async () => {
    const base = await tempDir("below-file");
    const file = join(base, "file");
    await writeFile(file, "x");
    const path = join(file, "data", "deeper");
    await expectRefused(await serve(path), path, `${file} is not a directory`);
    expect(await readFile(file, "utf8")).toBe("x");
    expect(await readdir(base)).toEqual(["file"]);
  });

  it("serve with --data on a symbolic link to nothing, or below one, exits 1 naming the path: a symbolic link to nothing (Node's mkdir looped there too)", async () => {
    const base = await tempDir("dangling");
    const link = join(base, "link");
    execFileSync("ln", ["-s", join(base, "missing"), link]);
    await expectRefused(await serve(link), link, "is a symbolic link to nothing");
    const below = join(link, "data");
    await expectRefused(await serve(below), below, `${link} is a symbolic link to nothing`);
    expect(await readdir(base)).toEqual(["link"]);
  });

  it.skipIf(!MOUNTABLE)(
    "serve with --data on a directory of a read-only file system exits 1 naming the path: read-only file system; nothing written",
    async () => {
      const dir = await readOnlyMount();
      await expectRefused(await serve(dir), dir, "read-only file system");
      expect(await readdir(dir)).toEqual([]);
    },
  );

  it.skipIf(!MOUNTABLE)(
    "serve with --data below a read-only file system (to be created) exits 1 naming the path: read-only file system; nothing created",
    async () => {
      const dir = await readOnlyMount();
      const path = join(dir, "data");
      await expectRefused(await serve(path), path, "read-only file system");
      expect(await readdir(dir)).toEqual([]);
    },
  );

  it("serve as a user without write permission on an existing data directory exits 1 naming the path: permission denied; nothing written", async () => {
    // Root writes anywhere: the server runs as nobody here, as a service user would.
    const base = await tempDir("denied");
    await chmod(base, 0o755);
    const dir = join(base, "data");
    await mkdir(dir, { mode: 0o755 });
    if (!ROOT) await chmod(dir, 0o555);
    await expectRefused(await serve(dir, [], NOBODY), dir, "permission denied");
    expect(await readdir(dir)).toEqual([]);
  });

  it("serve as a user who may not enter the parent of a missing data directory exits 1 naming the path: permission denied; nothing created", async () => {
    const base = await tempDir("no-search");
    if (ROOT) await chmod(base, 0o700);
    else await chmod(base, 0o500);
    const path = join(base, "data");
    await expectRefused(await serve(path, [], NOBODY), path, "permission denied");
    await chmod(base, 0o700);
    expect(await readdir(base)).toEqual([]);
  });

  it.skipIf(!SETPRIV)(
    "serve as root without CAP_DAC_OVERRIDE on a directory of mode 0555 exits 1 naming the path: permission denied; nothing written",
    async () => {
      const dir = await tempDir("no-cap");
      await chmod(dir, 0o555);
      const prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"];
      await expectRefused(await serve(dir, [], { prefix }), dir, "permission denied");
      const below = join(dir, "data");
      await expectRefused(await serve(below, [], { prefix }), below, "permission denied");
      expect(await readdir(dir)).toEqual([]);
    },
  );

  it("serve with --data holding a name over 255 bytes exits 1 naming the path: name too long; nothing created", async () => {
    const base = await tempDir("long-name");
    const path = join(base, "a".repeat(256), "data");
    await expectRefused(await serve(path), path, "name too long (a name in it is over 255 bytes)");
    expect(await readdir(base)).toEqual([]);
  });

  it("serve with --data a path over 4095 bytes exits 1 naming the path: name too long; nothing created", async () => {
    const base = await tempDir("long-path");
    const path = join(base, ...Array.from({ length: 21 }, () => "b".repeat(200)));
    expect(Buffer.byteLength(path)).toBeGreaterThan(4096);
    await expectRefused(await serve(path), path, "name too long (the path is over 4095 bytes)");
    expect(await readdir(base)).toEqual([]);
  });

  it("serve --workers 2 with --data on a regular file exits 1 naming the path, no worker started", async () => {
    const base = await tempDir("workers-file");
    const file = join(base, "data");
    await writeFile(file, "");
    const s = await serve(file, ["--workers", "2", "--log-level", "info"]);
    await expectRefused(s, file, "is not a directory");
    // The primary's log: nothing about a worker (the check comes before the first fork).
    expect(s.stdout()).not.toMatch(/worker/);
    expect(await readdir(base)).toEqual(["data"]);
  });

  it("serve on MongoDB without --issuer still checks the data directory (the development issuer keeps its key there): exit 1, MongoDB not contacted", async () => {
    const mongo = await silentServer();
    const s = await serve("/proc/nope", ["--mongodb-url", `mongodb://127.0.0.1:${mongo.port}/?directConnection=true`]);
    await expectRefused(s, "/proc/nope", "no such file or directory (/proc does not let it be created)");
    expect(mongo.connections()).toBe(0);
  });
});

describe("serve without a usable data directory: start-up ends on SIGTERM, workers are not started again for ever", () => {
  it("SIGTERM while start-up waits for MongoDB (with --issuer, --data is not used: /proc/nope is not checked) ends the process; with several workers (the default, issue 32 item 4), the primary stops the starting workers at once and exits 0", async () => {
    const mongo = await silentServer();
    const s = await serve("/proc/nope", [
      "--mongodb-url",
      `mongodb://127.0.0.1:${mongo.port}/?directConnection=true`,
      "--issuer",
      "http://127.0.0.1:9/",
    ]);
    // Start-up reached MongoDB (the data directory was not in its way), and waits for its answer.
    await until("a connection to MongoDB", async () => (mongo.connections() > 0 ? true : undefined), s.stderr);
    const pids = await workerPids(s.child.pid as number);
    for (const pid of pids) workers.add(pid);
    s.child.kill("SIGTERM");
    // One process ends by the signal; a primary stops its workers, which serve nothing yet, and ends.
    expect(await ended(s)).toEqual(
      pids.length > 0 ? { code: 0, signal: null, stderr: "" } : { code: null, signal: "SIGTERM", stderr: "" },
    );
    for (const pid of pids) await until(`worker ${pid} gone`, async () => ((await alive(pid)) ? undefined : true));
    expect(existsSync("/proc/nope")).toBe(false);
  });

  it("SIGTERM while start-up is blocked in a system call (open of a FIFO named trove.db, never answered) ends the process (--workers 1: a worker blocked so ends on the second signal, docs/operations.md)", async () => {
    const dir = await tempDir("fifo");
    execFileSync("mkfifo", [join(dir, "trove.db")]);
    const s = await serve(dir, ["--workers", "1"]);
    const pid = s.child.pid as number;
    // Where the kernel shows it: waiting for the FIFO's other end, the event loop blocked. A
    // kernel that does not show where a process waits (wchan "0") gets the signal after a while.
    const wchan = () => readFile(`/proc/${pid}/wchan`, "utf8").catch(() => "");
    const since = Date.now();
    await until(
      "start-up blocked opening the FIFO",
      async () => {
        const at = await wchan();
        if (at === "wait_for_partner" || s.child.exitCode !== null) return true;
        return (at === "0" || at === "") && Date.now() - since > 3000 ? true : undefined;
      },
      s.stderr,
    );
    s.child.kill("SIGTERM");
    expect(await ended(s)).toEqual({ code: null, signal: "SIGTERM", stderr: "" });
  });

  it("serve --workers 2: a worker started again that finds the data directory unusable ends the primary with exit 1 and that line, not a restart every second", async () => {
    const base = await tempDir("workers-restart");
    const dataDir = join(base, "data");
    const s = await serve(dataDir, ["--workers", "2", "--log-level", "info", "--issuer", "http://127.0.0.1:9/"]);
    await until(
      "2 workers serving",
      async () => (s.stdout().includes('"2 workers serving"') ? true : undefined),
      () => s.stderr(),
    );
    const pids = await workerPids(s.child.pid as number);
    for (const pid of pids) workers.add(pid);
    expect(pids).toHaveLength(2);
    // The data directory is moved away and a file put in its place; then a worker dies.
    await rename(dataDir, join(base, "moved"));
    await writeFile(dataDir, "");
    process.kill(pids[1] as number, "SIGKILL");
    await expectRefused(s, dataDir, "is not a directory");
    const log = s
      .stdout()
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as { msg: string });
    expect(log.filter((l) => l.msg.endsWith("starting it again"))).toHaveLength(1);
    expect(log.filter((l) => /^worker [12] could not start again: stopping the others$/.test(l.msg))).toHaveLength(1);
    for (const pid of pids) expect(await alive(pid)).toBe(false);
  }, 60_000);
});

describe("serve with a data directory to be made", () => {
  it("serve with --data a/b/c, all missing, makes each one (mode 0700), serves, and leaves no file of its check behind", async () => {
    const base = await tempDir("nested");
    const path = join(base, "a", "b", "c");
    const s = await startChildServer({ dataDir: path, args: ["--host", "127.0.0.1"] });
    cleanups.push(() => s.stop());
    for (const dir of [join(base, "a"), join(base, "a", "b"), path]) expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect((await readdir(path)).filter((name) => name.startsWith(".trove-write-check"))).toEqual([]);
    const res = await fetch(`${s.url}/resources/v2/data/home/`, {
      method: "HEAD",
      headers: { authorization: s.authorization },
    });
    expect(res.status).toBe(200);
  });
});

/** A TCP server that accepts and never answers: a MongoDB that start-up waits for. */
async function silentServer(): Promise<{ port: number; connections(): number }> {
  const sockets = new Set<net.Socket>();
  let count = 0;
  const server = net.createServer((socket) => {
    count += 1;
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return { port: (server.address() as net.AddressInfo).port, connections: () => count };
}
