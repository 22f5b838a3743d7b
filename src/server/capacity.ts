// How many connections this process can hold (docs/security.md, "Capacity"): the open-file limit
// in force and the memory it may use decide the default of --max-connections.

import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { totalmem } from "node:os";

/** What the default connection budget is derived from. */
export interface Capacity {
  /** The open-file soft limit in force (RLIMIT_NOFILE), or undefined where it cannot be read. */
  openFiles: number | undefined;
  /** Bytes of memory the process may use: the cgroup's limit when there is one, else the machine's. */
  memory: number;
}

/**
 * Descriptors kept for everything but connections: the storage (SQLite and its WAL, MongoDB's
 * pool), the log, the blobs a transfer opens, the console's files. A fifth of what remains is
 * kept too, for the blob file each large transfer opens beside its connection.
 */
export const RESERVED_FILES = 256;

/**
 * What one connection costs at most, for the memory side of the budget: its socket buffers,
 * Node's parser or HTTP/2 session, and what a parked poll holds (about 10 KiB, issue 14), with room.
 * A quarter of the memory may go to connections.
 */
export const CONNECTION_MEMORY = 64 * 1024;

/** Used where the open-file limit cannot be read (neither /proc nor a shell): POSIX's usual soft limit. */
export const ASSUMED_OPEN_FILES = 1024;

/** The budget is never below this (a tiny limit still serves a few clients) nor above the flag's maximum. */
const MIN_CONNECTIONS = 64;
const MAX_CONNECTIONS = 1_000_000;

/**
 * The open-file soft limit in force. Node raises the soft limit to the hard one itself when it
 * starts (on Linux and macOS, `PlatformInit`), so what is read here is already the raised limit;
 * Node has no call to read it, hence /proc on Linux and the shell's `ulimit -n` elsewhere.
 */
export function openFileLimit(): number | undefined {
  try {
    const line = readFileSync("/proc/self/limits", "latin1")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
    if (soft === "unlimited") return MAX_CONNECTIONS;
    if (soft !== undefined && /^\d+$/.test(soft)) return Number(soft);
  } catch {
    // Not Linux: ask the shell, which inherits this process's limit.
  }
  try {
    const text = execFileSync("/bin/sh", ["-c", "ulimit -n"], { encoding: "latin1", timeout: 2000 }).trim();
    if (text === "unlimited") return MAX_CONNECTIONS;
    if (/^\d+$/.test(text)) return Number(text);
  } catch {
    // No shell: the caller assumes ASSUMED_OPEN_FILES.
  }
  return undefined;
}

/** This process's capacity, measured now. */
export function measureCapacity(): Capacity {
  const machine = totalmem();
  // 0 or a huge number when no cgroup limits the process.
  const constrained = process.constrainedMemory();
  return {
    openFiles: openFileLimit(),
    memory: constrained > 0 && constrained < machine ? constrained : machine,
  };
}

/**
 * The default of --max-connections for one process: what the descriptors allow (the limit less
 * RESERVED_FILES, less a fifth for the transfers' files) or what a quarter of the memory allows at
 * CONNECTION_MEMORY each, whichever is smaller; `processes` serving the port share the memory.
 */
export function defaultMaxConnections(capacity: Capacity, processes = 1): number {
  const files = capacity.openFiles ?? ASSUMED_OPEN_FILES;
  const byFiles = Math.floor(((files - RESERVED_FILES) * 4) / 5);
  const byMemory = Math.floor(capacity.memory / 4 / processes / CONNECTION_MEMORY);
  return Math.max(MIN_CONNECTIONS, Math.min(byFiles, byMemory, MAX_CONNECTIONS));
}

/**
 * The default budget of long-lived work (--max-long-lived): four fifths of the connections, so
 * that a fifth at least is always left to short requests (and at least one).
 */
export function defaultMaxLongLived(maxConnections: number): number {
  return Math.max(1, Math.min(maxConnections - 1, Math.floor((maxConnections * 4) / 5)));
}
