// The MongoDB adapter's client and what keeps it connected: a repair of the driver's hang on a
// socket that closed under a command (why an instance never came back after a database restart,
// docs/mongodb.md "When the database goes away and comes back"), and a watchdog that reconnects
// a client which stops making progress while a fresh client reaches the database.

import { createRequire } from "node:module";
import type { Socket } from "node:net";
import { MongoClient, type MongoClientOptions, MongoNetworkError } from "mongodb";
import { UnavailableError } from "../../domain/errors.js";
import { type StorageLogger, silentStorageLogger } from "../port.js";

/** The part of the driver's internal Connection (mongodb/lib/cmap/connection.js) the repair touches. */
interface DriverConnection {
  socket: Socket;
  id: number | string;
  address: string;
  error: Error | null;
  writeCommand(command: unknown, options: unknown): Promise<void>;
}

const REPAIRED = Symbol.for("trove.mongodb.writeOnClosedSocket");

/**
 * The driver (v7.9.0) writes a command with `socket.write()` and, when that returns false, waits
 * for "drain". A socket the server closed is destroyed at once but announces "close" only a turn
 * of the event loop later; a command started in between (a heartbeat woken by the very failure
 * that the close caused) writes to the destroyed socket, which returns false and never drains: the
 * command waits forever. For the server monitor that means no heartbeat ever ends, the server stays
 * Unknown and every operation fails server selection until the process restarts. Writes here fail
 * at once with the connection's own network error when the socket is or becomes closed, as any
 * other command on a lost connection does, so the monitor and the pool recover as designed.
 * Returns false when the driver's internals are not where this expects them (the watchdog remains).
 */
export function repairWriteOnClosedSocket(): boolean {
  let proto: (DriverConnection & { [REPAIRED]?: true }) | undefined;
  try {
    const require = createRequire(import.meta.url);
    proto = (require("mongodb/lib/cmap/connection.js") as { Connection?: { prototype: DriverConnection } }).Connection
      ?.prototype;
  } catch {
    return false;
  }
  if (!proto || typeof proto.writeCommand !== "function") return false;
  if (proto[REPAIRED]) return true;
  const write = proto.writeCommand;
  proto.writeCommand = function (this: DriverConnection, command: unknown, options: unknown): Promise<void> {
    const socket = this.socket;
    const closed = () => this.error ?? new MongoNetworkError(`connection ${this.id} to ${this.address} closed`);
    if (socket.destroyed) return Promise.reject(closed());
    return new Promise<void>((resolve, reject) => {
      const onClose = () => reject(closed());
      socket.once("close", onClose);
      write.call(this, command, options).then(
        () => {
          socket.off("close", onClose);
          resolve();
        },
        (err: unknown) => {
          socket.off("close", onClose);
          reject(err);
        },
      );
    });
  };
  proto[REPAIRED] = true;
  return true;
}

export interface MongoConnectionOptions {
  /** mongodb://… connection string. */
  url: string;
  /** How long the driver looks for a server before an operation fails, in ms (default 5000). */
  serverSelectionTimeout?: number;
  /** How long opening a connection, and a heartbeat, may take, in ms (default 5000). */
  connectTimeout?: number;
  /** How often the driver checks the server, in ms (default 10000, the driver's). */
  heartbeatFrequency?: number;
  /** How often the watchdog looks at the client, in ms (default 1000). */
  watchdogInterval?: number;
  /** How often, at most, the watchdog tries a fresh client while its own makes no progress, in ms (default 2000). */
  probeInterval?: number;
  /** Where reconnections are reported (default: nowhere). */
  logger?: StorageLogger;
  /** More driver options (tests). */
  clientOptions?: MongoClientOptions;
}

/** A connected client, watched: see ClientWatchdog. */
export interface MongoConnection {
  readonly client: MongoClient;
  readonly watchdog: ClientWatchdog;
  close(): Promise<void>;
}

/** Connects a client and starts its watchdog; UnavailableError when the database cannot be reached. */
export async function openMongoConnection(options: MongoConnectionOptions): Promise<MongoConnection> {
  const logger = options.logger ?? silentStorageLogger;
  if (!repairWriteOnClosedSocket()) {
    logger.warn({}, "MongoDB driver internals not as expected: its hang on closed sockets is left to the watchdog");
  }
  const connectTimeout = options.connectTimeout ?? 5000;
  const heartbeatFrequency = options.heartbeatFrequency ?? 10_000;
  const client = new MongoClient(options.url, {
    serverSelectionTimeoutMS: options.serverSelectionTimeout ?? 5000,
    connectTimeoutMS: connectTimeout,
    heartbeatFrequencyMS: heartbeatFrequency,
    ...options.clientOptions,
  });
  const watchdog = new ClientWatchdog(client, {
    url: options.url,
    connectTimeout,
    heartbeatFrequency,
    interval: options.watchdogInterval ?? 1000,
    probeInterval: options.probeInterval ?? 2000,
    logger,
  });
  try {
    await client.connect();
  } catch (err) {
    watchdog.stop();
    await client.close().catch(() => {});
    throw new UnavailableError(`cannot reach MongoDB: ${(err as Error).message}`);
  }
  watchdog.start();
  return {
    client,
    watchdog,
    async close() {
      watchdog.stop();
      await client.close();
    },
  };
}

interface WatchdogOptions {
  url: string;
  connectTimeout: number;
  heartbeatFrequency: number;
  interval: number;
  probeInterval: number;
  logger: StorageLogger;
}

/**
 * Reconnects the client (close, then connect: the same MongoClient, so every Db, Collection and
 * GridFSBucket made from it keeps working) when it makes no progress while the database answers
 * a fresh client. No progress is either of:
 * - stalled: no heartbeat has ended (succeeded or failed) for a heartbeat period plus twice the
 *   connect timeout. The driver bounds every heartbeat by the connect timeout, so its monitor is
 *   stuck (the hang repaired above, or any other): reconnect as soon as the database answers.
 * - failing: no heartbeat has succeeded since a fresh client first reached the database, for a
 *   heartbeat period plus twice the connect timeout (a normal monitor succeeds within one period).
 * A healthy client costs a timestamp comparison per interval; fresh clients are tried only while
 * heartbeats are not succeeding, at most once per probe interval.
 */
export class ClientWatchdog {
  /** Reconnections made (tests, logs). */
  reconnections = 0;
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private lastEnded = Date.now();
  private lastSucceeded = Date.now();
  /** When a fresh client first reached the database while ours was not succeeding. */
  private reachableSince: number | undefined;
  private nextProbe = 0;

  constructor(
    private readonly client: MongoClient,
    private readonly options: WatchdogOptions,
  ) {
    client.on("serverHeartbeatSucceeded", () => {
      this.lastEnded = this.lastSucceeded = Date.now();
      this.reachableSince = undefined;
    });
    client.on("serverHeartbeatFailed", () => {
      this.lastEnded = Date.now();
    });
  }

  start(): void {
    this.lastEnded = this.lastSucceeded = Date.now();
    this.timer = setInterval(() => void this.check(), this.options.interval);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One look at the client; public for tests. */
  async check(): Promise<void> {
    if (this.busy || !this.timer) return;
    const now = Date.now();
    const limit = this.options.heartbeatFrequency + 2 * this.options.connectTimeout;
    const stalled = now - this.lastEnded > limit;
    if (!stalled && now - this.lastSucceeded <= limit) return;
    if (now < this.nextProbe) return;
    this.nextProbe = now + this.options.probeInterval;
    this.busy = true;
    try {
      if (!(await this.databaseAnswers())) {
        this.reachableSince = undefined;
        return;
      }
      this.reachableSince ??= now;
      if (!stalled && now - this.reachableSince <= limit) return;
      const details = {
        sinceHeartbeatEnded: now - this.lastEnded,
        sinceHeartbeatSucceeded: now - this.lastSucceeded,
        databaseAnsweredFor: now - this.reachableSince,
      };
      this.options.logger.warn(
        details,
        stalled
          ? "MongoDB client's monitor is stuck while the database answers: reconnecting the client"
          : "MongoDB client keeps failing while the database answers a fresh client: reconnecting it",
      );
      const started = Date.now();
      await this.reconnect();
      this.reconnections++;
      this.lastEnded = this.lastSucceeded = Date.now();
      this.reachableSince = undefined;
      this.options.logger.info({ ms: Date.now() - started }, "MongoDB client reconnected");
    } catch (err) {
      this.options.logger.warn({ err: (err as Error).message }, "MongoDB client reconnection failed; will retry");
    } finally {
      this.busy = false;
    }
  }

  private async reconnect(): Promise<void> {
    // close() can only wait on the database for endSessions, which it skips without a selectable
    // server; bounded anyway. Operations in flight fail with network errors (503).
    await withTimeout(this.client.close(), this.options.connectTimeout).catch(() => {});
    await this.client.connect();
  }

  /** Whether a fresh client, with its own connection, reaches the database within the connect timeout. */
  private async databaseAnswers(): Promise<boolean> {
    const probe = new MongoClient(this.options.url, {
      serverSelectionTimeoutMS: this.options.connectTimeout,
      connectTimeoutMS: this.options.connectTimeout,
      maxPoolSize: 1,
    });
    try {
      await withTimeout(probe.db("admin").command({ ping: 1 }), 2 * this.options.connectTimeout);
      return true;
    } catch {
      return false;
    } finally {
      void withTimeout(probe.close(), this.options.connectTimeout).catch(() => {});
    }
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
