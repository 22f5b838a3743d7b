// `trove serve --workers N` (docs/operations.md, "Several cores"). One process's event loop uses
// one core; N worker processes (node:cluster) serve the same port, the primary handing each new
// connection to one of them in turn. The workers share the storage: the embedded store's data
// directory in SQLite's normal locking mode, or the MongoDB database as instances do. What one
// commits, the others are told through the primary (a PeerChannel), so a poll parked in one worker
// wakes for a PUT another answered. The primary serves nothing: it starts the workers and starts
// again one that died, relays their messages, keeps the development issuer's single-use grants,
// sums their metrics for GET /metrics, keeps the read-only switch (set on one worker, it is on in
// every worker before SetReadOnly answers), and stops them gracefully on SIGTERM or SIGINT.
//
// Every worker is the same server; slot 1 (whichever process holds it now) also runs what must
// run once per data directory: the report worker, the purge of expired tombstones, the filesystem
// stores' scanners.

import cluster, { type Worker } from "node:cluster";
import { type Logger, pino } from "pino";
import { AggregatorRegistry } from "prom-client";
import { type Grant, type GrantStore, type GrantTable, localGrants } from "../auth/dev-issuer.js";
import { ReadOnlySwitch } from "../services/read-only.js";
import type { ScanLease } from "../storage/filesystem/scan-lease.js";
import type { PeerChannel, WriteTurns } from "../storage/port.js";
import { stdoutLog } from "./log-destination.js";

/** The environment variable that gives a worker its slot, 1..N. */
const SLOT = "TROVE_WORKER_SLOT";
/** How long a worker waits for the primary's answer (metrics, grants). */
const ASK_TIMEOUT = 10_000;
/** How long a worker waits for the write turn before its writes go on under SQLite's lock alone (its busy timeout). */
const TURN_TIMEOUT = 5000;
/** How long after a worker died its slot is started again. */
const RESTART_DELAY = 1000;

type GrantOp =
  | { op: "put"; table: GrantTable; key: string; grant: Grant }
  | { op: "take" | "delete"; table: GrantTable; key: string };

/** Keys published in one turn of a worker's event loop, each [topic, key] once. */
type Published = { trove: "publish"; items: Array<[string, string]> };

/** Worker to primary. */
type Upward =
  | Published
  /** The write turn (WriteTurns): asked for, or given back. */
  | { trove: "turn"; op: "take" | "release" }
  | { trove: "ask"; id: number; what: "metrics" }
  | { trove: "ask"; id: number; what: "grants"; grant: GrantOp }
  /** The read-only switch, set through this worker: the primary sets it on every worker, then answers. */
  | { trove: "ask"; id: number; what: "read-only"; retryAfter: number }
  /** This worker listens to the primary now: it is told the read-only switch from here on. */
  | { trove: "hello" }
  /** The read-only setting `round` is applied in this worker. */
  | { trove: "applied"; round: number };

/** Primary to worker. */
type Downward =
  | Published
  /** The write turn is this worker's. */
  | { trove: "turn" }
  | { trove: "answer"; id: number; value?: unknown; error?: string }
  /** The read-only switch (seconds of Retry-After, 0 off); with `round`, to be acknowledged. */
  | { trove: "read-only"; retryAfter: number; round?: number }
  /** Stop: gracefully, or at once (a second signal). */
  | { trove: "stop"; now: boolean };

function isTroveMessage<T extends { trove: string }>(message: unknown): message is T {
  return typeof message === "object" && message !== null && typeof (message as { trove?: unknown }).trove === "string";
}

/** What a worker has of the others and of its primary. */
export interface WorkerLink {
  /** 1..N: slot 1 runs the once-per-directory duties. */
  readonly slot: number;
  /** Commits, report changes and jobs, to and from the other workers. */
  readonly peers: PeerChannel;
  /** Turns at the embedded store's write lock, handed out in order by the primary. */
  readonly turns: WriteTurns;
  /** The development issuer's grants, kept by the primary. */
  readonly grants: GrantStore;
  /** Every worker's metrics, summed by the primary (Prometheus text). */
  collectMetrics(): Promise<string>;
  /** The read-only switch of every worker: set here, it is set in all of them (the primary relays it). */
  readonly readOnly: ReadOnlySwitch;
  /** Filesystem stores: slot 1 scans their folders, the others serve what it records. */
  readonly scanLease: ScanLease;
  /** Calls `listener` each time this worker is told to stop: gracefully (the primary's first signal, or the primary is gone), or at once. */
  onStop(listener: (now: boolean) => void): void;
}

/** This process's link, when it is a worker of `trove serve --workers`; undefined otherwise. */
export function workerLink(): WorkerLink | undefined {
  const slot = Number(process.env[SLOT]);
  if (!cluster.isWorker || !Number.isInteger(slot) || slot < 1) return undefined;
  const listeners = new Map<string, Set<(key: string) => void>>();
  const pending = new Map<number, { resolve(value: unknown): void; reject(err: Error): void; timer: NodeJS.Timeout }>();
  let nextId = 0;
  const stopListeners: Array<(now: boolean) => void> = [];
  /** Who waits for the write turn the primary has been asked for (one at a time). */
  let granted: (() => void) | undefined;
  let turnTimer: NodeJS.Timeout | undefined;
  /** A stop told before the server listened (and added its listener): kept for it. */
  let stopped: boolean | undefined;
  const stopNow = (now: boolean) => {
    stopped = stopped === true || now;
    for (const listener of stopListeners) listener(now);
  };
  const send = (message: Upward): boolean => {
    if (!process.connected) return false;
    process.send?.(message);
    return true;
  };
  const readOnly = new ReadOnlySwitch((retryAfter) => ask<void>({ what: "read-only", retryAfter }));
  process.on("message", (message: unknown) => {
    if (!isTroveMessage<Downward>(message)) return;
    if (message.trove === "read-only") {
      readOnly.apply(message.retryAfter);
      if (message.round !== undefined) send({ trove: "applied", round: message.round });
    } else if (message.trove === "publish") {
      for (const [topic, key] of message.items) {
        for (const listener of listeners.get(topic) ?? []) listener(key);
      }
    } else if (message.trove === "answer") {
      const ask = pending.get(message.id);
      if (!ask) return;
      pending.delete(message.id);
      clearTimeout(ask.timer);
      if (message.error !== undefined) ask.reject(new Error(message.error));
      else ask.resolve(message.value);
    } else if (message.trove === "turn") {
      const run = granted;
      granted = undefined;
      clearTimeout(turnTimer);
      // A turn no one waits for any more (its wait timed out): given back at once.
      if (run) run();
      else send({ trove: "turn", op: "release" });
    } else if (message.trove === "stop") {
      stopNow(message.now);
    }
  });
  // The primary is gone (killed): nothing relays or restarts any more; stop serving, gracefully.
  // node:cluster's own listener would end the worker at once (process.exit) on a disconnect it
  // did not ask for, cutting every connection: this flag tells it the disconnect is expected.
  if (cluster.worker) cluster.worker.exitedAfterDisconnect = true;
  process.on("disconnect", () => {
    // Writes go on under SQLite's own lock alone while the worker stops.
    const run = granted;
    granted = undefined;
    run?.();
    for (const [id, ask] of pending) {
      pending.delete(id);
      clearTimeout(ask.timer);
      ask.reject(new Error("the primary process is gone"));
    }
    stopNow(false);
  });
  // From here on the primary tells this worker every change of the read-only switch, and answers
  // this with the switch as it is: both before the server listens (one channel, in order).
  send({ trove: "hello" });
  const ask = <T>(
    question: { what: "metrics" } | { what: "grants"; grant: GrantOp } | { what: "read-only"; retryAfter: number },
  ): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`the primary process did not answer within ${ASK_TIMEOUT / 1000} s`));
      }, ASK_TIMEOUT);
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      if (!send({ trove: "ask", id, ...question })) {
        pending.delete(id);
        clearTimeout(timer);
        reject(new Error("the primary process is gone"));
      }
    });
  const grant = <T>(op: GrantOp) => ask<T>({ what: "grants", grant: op });
  // What this turn of the event loop committed, sent once at its end: under load one message
  // carries many commits, and a store written many times in a turn is named once.
  const outbox = new Map<string, [string, string]>();
  const flush = () => {
    send({ trove: "publish", items: [...outbox.values()] });
    outbox.clear();
  };
  return {
    slot,
    peers: {
      publish(topic, key) {
        if (outbox.size === 0) setImmediate(flush);
        outbox.set(`${topic}\n${key}`, [topic, key]);
      },
      subscribe(topic, listener) {
        let set = listeners.get(topic);
        if (!set) {
          set = new Set();
          listeners.set(topic, set);
        }
        set.add(listener);
        return () => set.delete(listener);
      },
    },
    turns: {
      take(run) {
        if (granted) throw new Error("the write turn was asked for twice");
        granted = run;
        if (!send({ trove: "turn", op: "take" })) {
          granted = undefined;
          run();
          return;
        }
        // A worker stuck with the turn must not hold the others' writes for ever: after SQLite's
        // busy timeout they run under its lock alone, which refuses them (503) if it is still held.
        turnTimer = setTimeout(() => {
          if (granted !== run) return;
          granted = undefined;
          run();
        }, TURN_TIMEOUT);
      },
      release() {
        send({ trove: "turn", op: "release" });
      },
    },
    grants: {
      put: (table, key, value) => grant<void>({ op: "put", table, key, grant: value }),
      take: (table, key) => grant<Grant | undefined>({ op: "take", table, key }),
      delete: (table, key) => grant<void>({ op: "delete", table, key }),
    },
    collectMetrics: () => ask<string>({ what: "metrics" }),
    readOnly,
    scanLease: {
      duration: 30_000,
      hold: async () => slot === 1,
      release: async () => {},
    },
    onStop(listener) {
      stopListeners.push(listener);
      // The primary may stop a worker still starting (another could not start): else it would
      // serve on, and the primary wait for it forever.
      if (stopped !== undefined) listener(stopped);
    },
  };
}

export interface PrimaryOptions {
  workers: number;
  logger: Logger;
  /** Called once every worker listens, with the port (the development issuer's banner). */
  listening(port: number): void;
}

/**
 * Runs the primary: starts `workers` workers (this program again, with the same arguments, each
 * told its slot), and serves until SIGTERM or SIGINT, after which every worker stops gracefully;
 * a second signal stops them at once. Answers the exit code: 0 after a shutdown; a worker's own
 * when one could not start (the others are stopped then).
 */
export function runPrimary(options: PrimaryOptions): Promise<number> {
  const { logger, workers: count } = options;
  const slots = new Map<number, Worker>();
  const grants = localGrants();
  // Its constructor adds the listener of the workers' answers (prom-client's cluster support).
  const aggregator = new AggregatorRegistry();
  let started = 0;
  let stopping = false;
  // The write turn: who holds it, and who asked for it next, in order.
  let holder: Worker | undefined;
  const waiting: Worker[] = [];
  // The read-only switch (seconds of Retry-After, 0 off), the workers that are told its changes
  // (those that said hello), and the settings not yet applied by every one of them.
  let readOnly = 0;
  const told = new Set<Worker>();
  let nextRound = 0;
  const rounds = new Map<number, { pending: Set<Worker>; done(): void }>();
  const applied = (round: number, worker: Worker) => {
    const r = rounds.get(round);
    if (!r?.pending.delete(worker) || r.pending.size > 0) return;
    rounds.delete(round);
    r.done();
  };
  /** Sets the switch in every worker told of it; settles once each has applied it (or ended). */
  const setReadOnly = (retryAfter: number) =>
    new Promise<void>((done) => {
      readOnly = retryAfter;
      const round = nextRound++;
      const pending = new Set([...told].filter((w) => w.isConnected()));
      if (pending.size === 0) return done();
      rounds.set(round, { pending, done });
      for (const worker of pending) worker.send({ trove: "read-only", retryAfter, round } satisfies Downward);
    });
  const handTurn = () => {
    while (holder === undefined && waiting.length > 0) {
      const next = waiting.shift() as Worker;
      if (!next.isConnected()) continue;
      holder = next;
      next.send({ trove: "turn" } satisfies Downward);
    }
  };

  return new Promise<number>((resolve) => {
    const answer = (worker: Worker, id: number, work: () => Promise<unknown>) => {
      work().then(
        (value) => worker.isConnected() && worker.send({ trove: "answer", id, value } satisfies Downward),
        (err: Error) =>
          worker.isConnected() && worker.send({ trove: "answer", id, error: err.message } satisfies Downward),
      );
    };
    const onMessage = (worker: Worker, message: unknown) => {
      if (!isTroveMessage<Upward>(message)) return;
      if (message.trove === "hello") {
        told.add(worker);
        worker.send({ trove: "read-only", retryAfter: readOnly } satisfies Downward);
      } else if (message.trove === "applied") {
        applied(message.round, worker);
      } else if (message.trove === "turn") {
        if (message.op === "take") waiting.push(worker);
        else if (holder === worker) holder = undefined;
        handTurn();
      } else if (message.trove === "publish") {
        for (const other of slots.values()) {
          if (other !== worker && other.isConnected()) other.send(message satisfies Downward);
        }
      } else if (message.what === "metrics") {
        answer(worker, message.id, () => aggregator.clusterMetrics());
      } else if (message.what === "read-only") {
        answer(worker, message.id, () => setReadOnly(message.retryAfter));
      } else {
        const op = message.grant;
        answer(worker, message.id, () =>
          op.op === "put" ? grants.put(op.table, op.key, op.grant) : grants[op.op](op.table, op.key),
        );
      }
    };
    /** `again`: started in place of one that ended unexpectedly. */
    const fork = (slot: number, again = false) => {
      const worker = cluster.fork({ [SLOT]: String(slot) });
      let listened = false;
      slots.set(slot, worker);
      worker.on("message", (message: unknown) => onMessage(worker, message));
      worker.once("listening", (address) => {
        listened = true;
        if (stopping) {
          // A stop sent while it was starting may have come before it could hear one: again.
          if (worker.isConnected()) worker.send({ trove: "stop", now: stopAtOnce } satisfies Downward);
          return;
        }
        if (started === count) {
          logger.info({ slot, pid: worker.process.pid }, "worker started again");
          return;
        }
        started += 1;
        if (started === 1) for (let other = 2; other <= count; other++) fork(other);
        if (started === count) {
          logger.info({ workers: count, port: address.port }, `${count} workers serving`);
          options.listening(address.port);
        }
      });
      worker.once("exit", (code, signal) => {
        if (slots.get(slot) === worker) slots.delete(slot);
        told.delete(worker);
        for (const round of [...rounds.keys()]) applied(round, worker);
        // A turn it held or asked for goes to the next in line (SQLite released its lock).
        const place = waiting.indexOf(worker);
        if (place >= 0) waiting.splice(place, 1);
        if (holder === worker) holder = undefined;
        handTurn();
        if (stopping) {
          if (slots.size === 0) finish(0);
          return;
        }
        if (started < count) {
          // A worker could not start (a port in use, the storage unreachable): its own message
          // is on stderr. The others stop; the primary ends with its exit code.
          logger.error({ slot, code, signal }, "a worker could not start: stopping the others");
          stopAll(true);
          exitCode = typeof code === "number" && code !== 0 ? code : 1;
          if (slots.size === 0) finish(exitCode);
          return;
        }
        if (again && !listened) {
          // Started again, it could not start either (the data directory is gone, MongoDB cannot
          // be reached ...; its own message is on stderr): a third try would fare no better, and
          // retrying for ever would hide it. The others stop gracefully; the primary ends with its code.
          logger.error({ slot, code, signal }, `worker ${slot} could not start again: stopping the others`);
          exitCode = typeof code === "number" && code !== 0 ? code : 1;
          stopAll(false);
          if (slots.size === 0) finish(exitCode);
          return;
        }
        logger.error({ slot, code, signal }, `worker ${slot} ended unexpectedly: starting it again`);
        setTimeout(() => !stopping && fork(slot, true), RESTART_DELAY).unref();
      });
    };
    let exitCode = 0;
    let stopAtOnce = false;
    const stopAll = (now: boolean) => {
      stopping = true;
      stopAtOnce ||= now;
      for (const worker of slots.values()) {
        if (worker.isConnected()) worker.send({ trove: "stop", now } satisfies Downward);
      }
    };
    const finish = (code: number) => {
      process.off("SIGINT", first);
      process.off("SIGTERM", first);
      resolve(exitCode || code);
    };
    const first = (signal: NodeJS.Signals) => {
      process.off("SIGINT", first);
      process.off("SIGTERM", first);
      logger.info({ signal }, "stopping the workers gracefully");
      process.once("SIGINT", atOnce);
      process.once("SIGTERM", atOnce);
      stopAll(false);
      if (slots.size === 0) finish(0);
    };
    const atOnce = (second: NodeJS.Signals) => {
      logger.warn({ signal: second }, "second signal: stopping every worker at once");
      // As a single process would: the exit code of the signal, also when the workers end first.
      exitCode = second === "SIGINT" ? 130 : 143;
      stopAll(true);
      setTimeout(() => {
        // A worker told to stop at once exits at once; one still here is stuck (in a system call
        // while starting, say) and would outlive its primary.
        for (const worker of slots.values()) worker.process.kill("SIGKILL");
        process.exit(exitCode);
      }, 100).unref();
    };
    process.on("SIGINT", first);
    process.on("SIGTERM", first);
    // Slot 1 first, the others once it listens: on a new data directory, SQLite's switch to WAL
    // by two processes at once fails one of them at once (SQLITE_BUSY, no busy wait).
    fork(1);
  });
}

/** The primary's own logger: what it does (starts, restarts, stops), on the workers' stdout. */
export function primaryLogger(level: string, logBuffer: number): Logger {
  return pino({ level }, stdoutLog(logBuffer).stream).child({ role: "primary" });
}
