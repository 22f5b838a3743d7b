// mirror(): keeps a local directory (or any MirrorSink) equal to a store or a
// subtree by the spec's client procedure: initial poll, full recursive listing,
// then the change feed (gRPC WatchChanges when reachable, REST long poll
// otherwise); on RESET it relists and reconciles, and its cursor is persisted so
// that a restarted mirror resumes without a full copy. It refuses a target that
// holds something but is not its own (unless forced), can report what it would
// do without doing it (dry run), and ends every run with a summary event.

import { EventEmitter, on } from "node:events";
import { ConnectError } from "@connectrpc/connect";
import type { Auth } from "../auth.js";
import { createBackoff, isTransient, pause } from "../backoff.js";
import type { TroveClient } from "../client.js";
import { fromConnectError, isTransientConnectError } from "../connect-errors.js";
import type { WatchChangesResponse } from "../gen/trove/resources/v2/changes_pb.js";
import { createRestClient, type GetResult, type TroveRestClient } from "../rest/client.js";
import {
  BATCH_BYTES,
  BATCH_FILES,
  createCancellation,
  eachLimited,
  fileBudget,
  readWhole,
  WHOLE_FILE_BYTES,
} from "../rest/in-flight.js";
import type { FeedChange, FeedEvent } from "../rest/poll.js";
import { BatchUnsupportedError, ConnectionError, isNotFoundError } from "../trove-errors.js";
import { DirectorySink } from "./directory-sink.js";
import type { MirrorSink } from "./sink.js";
import { MirrorDatabase, type MirrorIdentity } from "./state-database.js";

export interface MirrorOptions {
  /** A REST client to use; or give baseUrl (and auth). */
  client?: TroveRestClient;
  baseUrl?: string;
  auth?: Auth;
  store: string;
  /** The subtree to mirror, e.g. "templates" ("" or omitted: the whole store). */
  path?: string;
  /** A directory to keep equal to the store, or a sink. */
  target: string | MirrorSink;
  /**
   * For a directory target: the marker, where the store, path, server URL, cursor and tags are
   * kept (default `.{dir}.trove-mirror.json` beside it).
   */
  cursorFile?: string;
  /**
   * Mirror into a target that holds something but is not this mirror's own (no marker, or the
   * marker of another store or path). What the store does not hold is then deleted from it.
   * Without it such a target is refused: `done` rejects with a MirrorRefusedError, nothing changed.
   */
  force?: boolean;
  /**
   * Report what would be written and deleted (`write`, `directory` and `remove` events, and the
   * `summary`) without changing anything: no file, directory or marker is written, nothing is
   * downloaded (sizes come from listings, or HEAD requests). Implies `once`.
   */
  dryRun?: boolean;
  /** Called with every event, from the very first (the same events as `on("event")`). */
  onEvent?: (event: MirrorEvent) => void;
  /** Stops the mirror; `done` then resolves. */
  signal?: AbortSignal;
  /** "auto" (default): WatchChanges over gRPC when reachable, else long poll; or force one. */
  follow?: "auto" | "watch" | "poll";
  /** Stop once the copy is up to date, instead of following the feed. */
  once?: boolean;
  /** Seconds a long poll waits (default 30; the server caps it). */
  pollWait?: number;
  /** Longest pause between retries after a failure, in ms (default 10,000). */
  maxRetryDelay?: number;
  /** Files downloaded at once by a full copy (the first run, a reset): 1 to 64, default 4, as `pull`. */
  transfers?: number;
  /**
   * A full copy reads files of up to 256 KiB by batches of up to 100 (512 KiB), one
   * ResourceService.ReadMany request each (default true; a server without it is read by GETs).
   */
  batch?: boolean;
  /**
   * false: no retry; a failure that would be retried (the server unreachable or unavailable, a
   * store that does not exist) ends the mirror, `done` rejecting with it (a TroveError).
   * Default: retried with exponential backoff and jitter, a `retry` event each time.
   */
  retry?: boolean;
  /** The heartbeat a WatchChanges stream asks the server for, in ms (default 15,000). */
  watchHeartbeatMs?: number;
  /**
   * How long a WatchChanges stream may hear nothing, not even a heartbeat, before its connection
   * is dropped and the mirror reconnects on a new one, in ms (default twice the heartbeat and 5 s
   * more: 35,000).
   */
  watchSilenceMs?: number;
}

export type MirrorEvent =
  | { type: "start"; resumed: boolean; eventId: number; dryRun: boolean }
  | { type: "follow"; via: "watch" | "poll" }
  | { type: "sync"; reason: "initial" | "reset"; eventId: number; strategy: "recursive-listing" | "directory-tags" }
  | { type: "synced"; reason: "initial" | "reset"; eventId: number; written: number; removed: number; skipped: number }
  | { type: "write"; path: string; tag: string; size: number }
  | { type: "directory"; path: string; tag: string }
  | { type: "remove"; path: string; directory: boolean }
  | { type: "batch"; eventId: number; events: number }
  | { type: "idle"; eventId: number }
  | { type: "store-missing"; store: string }
  | { type: "retry"; error: unknown; delayMs: number }
  | { type: "summary"; written: number; removed: number; bytes: number; ms: number; eventId: number; dryRun: boolean }
  | { type: "stop"; eventId: number };

/** Counters of what a mirror did (or, in a dry run, would do), for progress and tests. */
export interface MirrorStats {
  listings: number;
  /** Files written. */
  downloads: number;
  /** Files and directories deleted (a directory counts once, with its contents). */
  removals: number;
  bytes: number;
  events: number;
  resets: number;
}

class StoreMissing extends Error {}

/** The heartbeat a gRPC watch asks the server for, and the silence after which it is given up. */
const WATCH_HEARTBEAT_MS = 15_000;
const silenceOf = (heartbeatMs: number) => 2 * heartbeatMs + 5_000;

/**
 * The target holds something and is not this mirror's own: `done` rejects with it before
 * anything is changed. `force: true` mirrors into it anyway.
 */
export class MirrorRefusedError extends Error {
  override name = "MirrorRefusedError";
  readonly code = "ERR_MIRROR_TARGET_NOT_EMPTY";
  constructor(
    /** The target (a directory path, or the sink's description). */
    readonly target: string,
    /** Where the marker was looked for. */
    readonly marker: string | undefined,
    /** What the marker there mirrors, if there is one. */
    readonly found: { store: string; path: string } | undefined,
    readonly store: string,
    readonly path: string,
  ) {
    const what = `${store}/${path}`;
    const why = found
      ? `it is the mirror of ${found.store}/${found.path} (marker ${marker})`
      : `it is not empty and is not a mirror of ${what}${marker ? ` (no marker ${marker})` : ""}`;
    super(
      `refusing to mirror ${what} into ${target}: ${why}; choose an empty directory, or force it ` +
        `(whatever ${what} does not hold is then deleted from it)`,
    );
  }
}

function retryable(err: unknown): boolean {
  return err instanceof StoreMissing || isTransient(err) || isTransientConnectError(err);
}

/**
 * A running mirror: an EventEmitter of `event` (every MirrorEvent) and of each event's type,
 * and an async iterable of MirrorEvents. `done` settles when it stops: resolved after
 * `signal` aborts (or when up to date with `once`), rejected on an error it cannot retry.
 */
export class StoreMirror extends EventEmitter {
  readonly done: Promise<void>;
  readonly stats: MirrorStats = { listings: 0, downloads: 0, removals: 0, bytes: 0, events: 0, resets: 0 };
  readonly store: string;
  /** The mirrored subtree, without leading or trailing "/". */
  readonly path: string;
  /** Whose mirror this is, and the last event applied (written to `db` with each commit). */
  private state!: MirrorIdentity;
  /** The tags of what the sink holds, one entry read or written at a time. */
  private db: MirrorDatabase | undefined;
  private readonly rest: TroveRestClient;
  private readonly sink: MirrorSink;
  private readonly controller = new AbortController();
  /** Each request's own signal, all aborted when the mirror stops: none piles listeners on `signal`. */
  private readonly requests = createCancellation(this.controller.signal);
  private readonly transfers: number;
  /** Small files go by ReadMany batches until the server says it has none (then by GET). */
  private batching: boolean;
  private grpc: TroveClient | undefined;
  private readonly dryRun: boolean;
  private readonly stopWhenUpToDate: boolean;

  constructor(private readonly options: MirrorOptions) {
    super();
    this.store = options.store;
    this.path = (options.path ?? "").replace(/^\/+|\/+$/g, "");
    this.dryRun = options.dryRun === true;
    this.stopWhenUpToDate = options.once === true || this.dryRun;
    this.transfers = options.transfers ?? 4;
    this.batching = options.batch !== false;
    if (!Number.isInteger(this.transfers) || this.transfers < 1 || this.transfers > 64) {
      throw new RangeError(`transfers must be an integer from 1 to 64, not ${options.transfers}`);
    }
    if (options.client) this.rest = options.client;
    else if (options.baseUrl) this.rest = createRestClient({ baseUrl: options.baseUrl, auth: options.auth });
    else throw new TypeError("mirror needs a client or a baseUrl");
    this.sink =
      typeof options.target === "string"
        ? new DirectorySink({ target: options.target, stateFile: options.cursorFile })
        : options.target;
    if (options.signal?.aborted) this.controller.abort();
    options.signal?.addEventListener("abort", () => this.controller.abort(), { once: true });
    this.done = this.run().finally(() => {
      this.requests.dispose();
      this.grpc?.close();
    });
    // A caller that only listens to events must not get an unhandled rejection.
    this.done.catch(() => {});
  }

  /** The last event applied. */
  get eventId(): number {
    return this.state?.eventId ?? -1;
  }

  /** Stops following; `done` resolves. */
  stop(): void {
    this.controller.abort();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<MirrorEvent> {
    const ended = new AbortController();
    this.done.finally(() => ended.abort());
    try {
      for await (const [event] of on(this, "event", { signal: ended.signal })) {
        yield event as MirrorEvent;
        if ((event as MirrorEvent).type === "stop") return;
      }
    } catch (err) {
      if (!ended.signal.aborted) throw err;
    }
  }

  private note(event: MirrorEvent): void {
    this.options.onEvent?.(event);
    this.emit("event", event);
    this.emit(event.type, event);
  }

  private get signal(): AbortSignal {
    return this.controller.signal;
  }

  private async run(): Promise<void> {
    const started = performance.now();
    try {
      await this.prepare();
      try {
        await this.follow();
      } catch (err) {
        await this.close();
        this.summarize(started);
        throw err;
      }
      await this.close();
      this.summarize(started);
      this.note({ type: "stop", eventId: this.state.eventId });
    } finally {
      // What was not committed (a batch cut short, all of a dry run) is dropped.
      this.db?.close();
    }
  }

  private get entries(): MirrorDatabase {
    return this.db as MirrorDatabase;
  }

  private summarize(started: number): void {
    const { downloads: written, removals: removed, bytes } = this.stats;
    const ms = Math.round(performance.now() - started);
    const eventId = this.state?.eventId ?? -1;
    this.note({ type: "summary", written, removed, bytes, ms, eventId, dryRun: this.dryRun });
  }

  /** Whether the sink holds anything; undefined when it cannot tell. */
  private async sinkHoldsAny(): Promise<boolean | undefined> {
    if (this.sink.eachPath) {
      for await (const _ of this.sink.eachPath()) return true;
      return false;
    }
    if (this.sink.listPaths) return (await this.sink.listPaths()).size > 0;
    return undefined;
  }

  /** Reads the marker, refuses a target that is not this mirror's own, and opens the sink. */
  private async prepare(): Promise<void> {
    this.db = this.sink.openStateDatabase
      ? await this.sink.openStateDatabase({ dryRun: this.dryRun })
      : MirrorDatabase.fromState(await this.sink.loadState?.());
    const saved = this.db.identity();
    const holds = await this.sinkHoldsAny();
    const own = saved !== undefined && saved.store === this.store && saved.path === this.path;
    if (holds === true && !own && !this.options.force) {
      const target = typeof this.options.target === "string" ? this.options.target : "the sink";
      const found = saved ? { store: saved.store, path: saved.path } : undefined;
      throw new MirrorRefusedError(target, this.sink.stateLocation, found, this.store, this.path);
    }
    // A cursor of another server means nothing here; nor does one whose copy was emptied since.
    const sameServer = saved?.url === undefined || saved.url === this.rest.baseUrl;
    const emptied = holds === false && this.db.holdsAny();
    const resumed = own && sameServer && !emptied && saved.eventId >= 0;
    this.state = resumed
      ? { ...saved, url: this.rest.baseUrl }
      : { store: this.store, path: this.path, url: this.rest.baseUrl, eventId: -1 };
    // Written with the first commit (after the first copy): a mirror stopped before keeps what it had.
    if (!resumed) this.db.clear();
    this.db.setIdentity(this.state);
    if (!this.dryRun) await this.sink.open?.();
    this.note({ type: "start", resumed, eventId: this.state.eventId, dryRun: this.dryRun });
  }

  private async close(): Promise<void> {
    if (!this.dryRun) await this.sink.close?.().catch(() => {});
  }

  /** Commits the entries and the cursor (a sink of one record gets the whole state). */
  private async save(): Promise<void> {
    if (this.dryRun) return;
    this.entries.setEventId(this.state.eventId);
    this.entries.commit();
    if (!this.sink.openStateDatabase) await this.sink.saveState?.(this.entries.toState());
  }

  private async follow(): Promise<void> {
    await this.withRetries(async () => {
      if (this.state.eventId < 0) {
        // The spec's first step: a poll without parameters gives the store's current event id.
        const status = await this.requests.run((signal) => this.rest.poll({ signal }));
        const reset = status.find((e) => e.kind === "reset" && e.store === this.store);
        await this.resync(reset?.eventId ?? 0, "initial");
      }
      return undefined;
    });
    if (this.signal.aborted) return;
    let via = this.stopWhenUpToDate ? "poll" : (this.options.follow ?? "auto");
    while (!this.signal.aborted) {
      if (via === "poll") {
        this.note({ type: "follow", via: "poll" });
        const finished = await this.withRetries(() => this.followByPoll());
        if (finished) break;
        continue;
      }
      this.note({ type: "follow", via: "watch" });
      try {
        await this.withRetries(() => this.followByWatch(), via === "auto");
      } catch (err) {
        if (via !== "auto") throw err;
        // No gRPC face reachable (e.g. a proxy speaking only HTTP/1.1): long poll from now on.
        via = "poll";
      }
    }
  }

  /**
   * Runs `step` until it returns true or the mirror stops, retrying transient failures with
   * backoff. With `firstAttemptFatal`, a failure before `step` ever succeeded is thrown.
   */
  private async withRetries(step: () => Promise<boolean | undefined>, firstAttemptFatal = false) {
    const backoff = createBackoff({ maxMs: this.options.maxRetryDelay ?? 10_000 });
    let progressed = false;
    while (!this.signal.aborted) {
      try {
        const before = this.stats.events + this.stats.listings;
        const finished = await step();
        if (finished !== false) return finished === true;
        if (this.stats.events + this.stats.listings > before) progressed = true;
        backoff.reset();
      } catch (err) {
        if (this.signal.aborted) return true;
        if (firstAttemptFatal && !progressed) throw err;
        if (!retryable(err)) throw err;
        if (this.options.retry === false) throw err instanceof ConnectError ? fromConnectError(err) : err;
        if (this.stats.events + this.stats.listings > 0) progressed = true;
        const delay = backoff.next();
        this.note({ type: "retry", error: err, delayMs: delay });
        await pause(delay, this.signal);
      }
    }
    return true;
  }

  /** One long poll and its events; true when the mirror should stop (`once` and up to date). */
  private async followByPoll(): Promise<boolean> {
    const events = await this.requests.run((signal) =>
      this.rest.poll({
        cursors: { [this.store]: Math.max(0, this.state.eventId) },
        wait: this.stopWhenUpToDate ? 0 : (this.options.pollWait ?? 30),
        signal,
      }),
    );
    if (events.length === 0) {
      this.note({ type: "idle", eventId: this.state.eventId });
      return this.stopWhenUpToDate;
    }
    await this.apply(events);
    return false;
  }

  /** Follows WatchChanges until the stream ends; returns false so that withRetries reconnects. */
  private async followByWatch(): Promise<boolean> {
    // Loaded here, not at start-up: the gRPC client and its generated descriptors are most of
    // what importing the SDK costs, and a mirror that polls (or `--once`) never needs them.
    const { createTroveClient } = await import("../client.js");
    this.grpc ??= createTroveClient({
      baseUrl: this.rest.baseUrl,
      auth: this.rest.tokenProvider,
      protocol: "grpc",
    });
    // A watch that hears nothing, not even a heartbeat, is on a connection that is gone without
    // saying so (measured: a server stopped as the stream opened left it waiting for good, 1 run
    // in 6): it is ended and retried like a lost connection, on a new connection (the session
    // manager would otherwise reuse the silent one, which no ping checks).
    const heartbeatMs = this.options.watchHeartbeatMs ?? WATCH_HEARTBEAT_MS;
    const silenceMs = this.options.watchSilenceMs ?? silenceOf(heartbeatMs);
    const call = new AbortController();
    const stop = () => call.abort();
    this.signal.addEventListener("abort", stop, { once: true });
    let silent = false;
    let timer: NodeJS.Timeout | undefined;
    const listen = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        silent = true;
        call.abort();
      }, silenceMs);
    };
    listen();
    const stream = this.grpc.changes.watchChanges(
      {
        cursors: [{ store: this.store, eventId: BigInt(Math.max(0, this.state.eventId)) }],
        heartbeatMillis: heartbeatMs,
      },
      { signal: call.signal },
    );
    try {
      await this.applyWatch(stream, listen);
    } catch (err) {
      if (!silent || this.signal.aborted) throw err;
      this.grpc.close();
      this.grpc = undefined;
      throw new ConnectionError(
        0,
        `no message from ${this.rest.baseUrl} in ${silenceMs / 1000} s (a heartbeat was due every ${heartbeatMs / 1000} s); reconnecting on a new connection`,
      );
    } finally {
      clearTimeout(timer);
      this.signal.removeEventListener("abort", stop);
    }
    return false;
  }

  /** Applies what a WatchChanges stream brings; `heard` is called on every message. */
  private async applyWatch(stream: AsyncIterable<WatchChangesResponse>, heard: () => void): Promise<void> {
    const { Operation } = await import("../gen/trove/resources/v2/changes_pb.js");
    for await (const res of stream) {
      heard();
      if (res.heartbeat || res.events.length === 0) {
        this.note({ type: "idle", eventId: this.state.eventId });
        continue;
      }
      const events: FeedEvent[] = [];
      for (const e of res.events) {
        if (e.kind.case === "reset") {
          events.push({ kind: "reset", store: e.kind.value.store, eventId: Number(e.kind.value.eventId) });
        } else if (e.kind.case === "change") {
          const c = e.kind.value;
          events.push({
            kind: "change",
            store: c.store,
            eventId: Number(c.eventId),
            uri: c.uri,
            path: c.path.replace(/^\/+/, ""),
            operation: c.operation === Operation.DELETE ? "delete" : "modify",
            previousTag: c.previousTag,
            tag: c.tag,
            type: c.type,
            directory: c.directory,
          });
        }
      }
      await this.apply(events);
    }
  }

  private async apply(events: FeedEvent[]): Promise<void> {
    for (const e of events) {
      if (this.signal.aborted) break;
      if (e.store !== this.store) continue;
      this.stats.events += 1;
      if (e.kind === "reset") {
        await this.resync(e.eventId, "reset");
        continue;
      }
      if (e.eventId <= this.state.eventId) continue;
      await this.applyChange(e);
      this.state.eventId = e.eventId;
    }
    await this.save();
    this.note({ type: "batch", eventId: this.state.eventId, events: events.length });
  }

  /** The event's path relative to the mirrored subtree; undefined when outside it; "" for the subtree itself. */
  private relative(path: string): string | undefined {
    if (this.path === "") return path;
    if (path === this.path) return "";
    if (path.startsWith(`${this.path}/`)) return path.slice(this.path.length + 1);
    return undefined;
  }

  private async applyChange(e: FeedChange): Promise<void> {
    const rel = this.relative(e.path);
    if (rel === undefined) {
      // The deletion of an ancestor removes the whole subtree.
      if (e.operation === "delete" && (e.path === "" || this.path.startsWith(`${e.path}/`))) await this.removeLocal("");
      return;
    }
    if (e.operation === "delete") {
      // Deleting a directory deletes what it held: their events come too, for entries gone by then.
      if (rel === "" || this.entries.get(rel) !== undefined) return this.removeLocal(rel);
      if (!this.dryRun) await this.sink.remove(rel);
      return;
    }
    if (e.directory) {
      await this.makeDirectory(rel, e.tag);
      return;
    }
    if (this.entries.get(rel)?.tag === e.tag) return;
    await this.download(rel);
  }

  private async removeLocal(rel: string, directory = this.entries.get(rel)?.directory ?? rel === ""): Promise<void> {
    if (!this.dryRun) await this.sink.remove(rel);
    this.entries.deleteTree(rel);
    this.stats.removals += 1;
    this.note({ type: "remove", path: rel, directory });
  }

  private async makeDirectory(rel: string, tag: string): Promise<void> {
    const known = this.entries.get(rel);
    if (known && !known.directory) await this.removeLocal(rel);
    if (!known?.directory) {
      if (!this.dryRun) await this.sink.makeDirectory(rel);
      this.note({ type: "directory", path: rel, tag });
    }
    this.entries.set(rel, { tag, directory: true });
  }

  private storePath(rel: string): string {
    if (this.path === "") return rel;
    return rel === "" ? this.path : `${this.path}/${rel}`;
  }

  /**
   * Copies the current contents of a file; one that is gone by now is left to its delete event.
   * A dry run only notes it, with the size of the listing (`known`) or of a HEAD request.
   */
  private async download(rel: string, listed?: { tag: string; size?: number | undefined }): Promise<boolean> {
    if (this.dryRun) return this.noteDownload(rel, listed);
    try {
      // The request's signal lives until the body is written: the whole download is one request.
      return await this.requests.run(async (signal) => {
        const got = await this.rest.get(this.store, this.storePath(rel), { as: "stream", signal });
        if (got.notModified) return false;
        await this.writeDownload(rel, got, signal);
        return true;
      });
    } catch (err) {
      if (isNotFoundError(err)) return false;
      throw err;
    }
  }

  /**
   * Small files (`batchesOf`) by one ReadMany request (issue 31), each as `download` would: a
   * file gone by now is left to its delete event, as is one that became a directory. A server
   * without ReadMany: these and every later file by GET. Resolves with the files written.
   */
  private async downloadMany(rows: readonly TodoRow[]): Promise<number> {
    let written = 0;
    let answered = 0;
    try {
      await this.requests.run(async (signal) => {
        const paths = rows.map((r) => this.storePath(r.path));
        for await (const got of this.rest.readMany(this.store, paths, { signal })) {
          answered += 1;
          const rel = (rows[got.index] as TodoRow).path;
          if (got.error !== undefined) {
            if (isNotFoundError(got.error)) continue;
            throw got.error;
          }
          if (got.directory) continue;
          await this.writeBody(rel, got.body, { tag: got.tag, type: got.type });
          written += 1;
        }
      });
    } catch (err) {
      if (!(err instanceof BatchUnsupportedError) || answered > 0) throw err;
      // One GET at a time: the batch holds one of the `transfers` places, not a hundred.
      this.batching = false;
      for (const r of rows) if (await this.download(r.path, { tag: r.tag, size: r.size ?? undefined })) written += 1;
    }
    return written;
  }

  /** A small file's whole contents written (a directory in its place removed first), and noted. */
  private async writeBody(rel: string, body: Buffer, info: { tag: string; type: string }): Promise<void> {
    if (this.entries.get(rel)?.directory) await this.removeLocal(rel);
    await (this.sink.writeBytes as NonNullable<MirrorSink["writeBytes"]>)(rel, body, info);
    this.noteWritten(rel, info.tag, body.byteLength);
  }

  private noteWritten(rel: string, tag: string, size: number): void {
    this.entries.set(rel, { tag, directory: false });
    this.stats.downloads += 1;
    this.stats.bytes += size;
    this.note({ type: "write", path: rel, tag, size });
  }

  private async writeDownload(
    rel: string,
    got: GetResult<ReadableStream<Uint8Array>> & { notModified: false },
    signal: AbortSignal,
  ): Promise<void> {
    const info = { tag: got.tag, type: got.type };
    if (this.sink.writeBytes && got.size !== undefined && got.size <= WHOLE_FILE_BYTES) {
      // A file of a few KiB, the common case: one buffer, one write, as pull() does.
      await this.writeBody(rel, await readWhole(got.body, got.size, signal), info);
      return;
    }
    const known = this.entries.get(rel);
    if (known?.directory) await this.removeLocal(rel);
    let size = 0;
    const counted = (got.body as ReadableStream<Uint8Array>).pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          size += chunk.byteLength;
          controller.enqueue(chunk);
        },
      }),
    );
    await this.sink.writeFile(rel, counted, info);
    this.noteWritten(rel, got.tag, size);
  }

  private async noteDownload(rel: string, listed?: { tag: string; size?: number | undefined }): Promise<boolean> {
    let info = listed?.size === undefined ? undefined : listed;
    if (!info) {
      try {
        const head = await this.requests.run((signal) => this.rest.head(this.store, this.storePath(rel), { signal }));
        if (head.notModified) return false;
        info = head;
      } catch (err) {
        if (isNotFoundError(err)) return false;
        throw err;
      }
    }
    if (this.entries.get(rel)?.directory) await this.removeLocal(rel, true);
    this.noteWritten(rel, info.tag, info.size ?? 0);
    return true;
  }

  /** RESET (or the first run): relist and reconcile, then continue from `eventId`. */
  private async resync(eventId: number, reason: "initial" | "reset"): Promise<void> {
    if (reason === "reset") this.stats.resets += 1;
    let features: string[];
    try {
      features = (await this.requests.run((signal) => this.rest.stores.get(this.store, { signal }))).features;
    } catch (err) {
      if (!isNotFoundError(err)) throw err;
      // The store is gone (or not yet created): keep the local copy until it is back. A mirror
      // that only catches up (`once`) has nothing to wait for: it fails.
      this.note({ type: "store-missing", store: this.store });
      if (this.stopWhenUpToDate || this.options.retry === false) throw err;
      throw new StoreMissing(`store ${this.store} does not exist`);
    }
    const byTags = reason === "reset" && features.includes("sync-recursive") && this.entries.get("") !== undefined;
    this.note({ type: "sync", reason, eventId, strategy: byTags ? "directory-tags" : "recursive-listing" });
    const counts = { written: 0, removed: 0, skipped: 0 };
    if (byTags) await this.reconcileByTags("", counts);
    else await this.reconcileByListing(counts);
    this.state.eventId = eventId;
    await this.save();
    this.note({ type: "synced", reason, eventId, ...counts });
  }

  private async listDirectory(rel: string, recursive: boolean) {
    this.stats.listings += 1;
    try {
      return await this.requests.run((signal) =>
        this.rest.list(this.store, this.storePath(rel), { recursive, signal }),
      );
    } catch (err) {
      if (isNotFoundError(err)) return undefined;
      throw err;
    }
  }

  /**
   * sync-snapshot stores (and first copies): one recursive listing, compared with what the sink
   * holds. Both are read into scratch tables of the state's database as they arrive, and compared
   * there: nothing is held in memory for the tree.
   */
  private async reconcileByListing(counts: { written: number; removed: number; skipped: number }): Promise<void> {
    const db = this.entries;
    db.run(
      "CREATE TEMP TABLE IF NOT EXISTS remote (path TEXT PRIMARY KEY, tag TEXT NOT NULL, directory INTEGER NOT NULL, size INTEGER) WITHOUT ROWID",
    );
    db.run("CREATE TEMP TABLE IF NOT EXISTS local (path TEXT PRIMARY KEY, directory INTEGER NOT NULL) WITHOUT ROWID");
    db.run("DELETE FROM temp.remote");
    db.run("DELETE FROM temp.local");
    // A batch of the listing in one statement: its entries as one JSON array.
    const addRemote =
      "INSERT INTO temp.remote (path, tag, directory, size) SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?) WHERE true ON CONFLICT DO NOTHING";
    this.stats.listings += 1;
    let listed = false;
    try {
      await this.requests.run(async (signal) => {
        const listing = await this.rest.listStream(this.store, this.storePath(""), { recursive: true, signal });
        db.run(addRemote, JSON.stringify([["", listing.tag, 1, null]]));
        for await (const batch of listing.batches) {
          const rows = batch.filter((e) => !e.deleted).map((e) => [e.name, e.tag, e.directory ? 1 : 0, e.size ?? null]);
          db.run(addRemote, JSON.stringify(rows));
        }
      });
      listed = true;
    } catch (err) {
      if (!isNotFoundError(err)) throw err;
    }
    const addLocal = "INSERT INTO temp.local (path, directory) VALUES (?, ?) ON CONFLICT DO NOTHING";
    const listsItself = this.sink.eachPath !== undefined || this.sink.listPaths !== undefined;
    if (this.sink.eachPath) for await (const [p, d] of this.sink.eachPath()) db.run(addLocal, p, d ? 1 : 0);
    else if (this.sink.listPaths) for (const [p, d] of await this.sink.listPaths()) db.run(addLocal, p, d ? 1 : 0);
    else db.run("INSERT INTO temp.local (path, directory) SELECT path, directory FROM entries WHERE path <> ''");
    db.run("DELETE FROM temp.local WHERE path = ''");

    // Strays, and entries whose kind changed, go first; a removed directory takes its contents along.
    for (let after = ""; ; ) {
      const stray = db.row<{ path: string; directory: number }>(
        "SELECT l.path, l.directory FROM temp.local l LEFT JOIN temp.remote r ON r.path = l.path WHERE l.path > ? AND (r.path IS NULL OR r.directory <> l.directory) ORDER BY l.path LIMIT 1",
        after,
      );
      if (stray === undefined) break;
      await this.removeLocal(stray.path, stray.directory === 1);
      counts.removed += 1;
      if (stray.directory === 1)
        db.run("DELETE FROM temp.local WHERE path >= ? AND path < ?", `${stray.path}/`, `${stray.path}0`);
      after = stray.path;
    }
    db.run("DELETE FROM entries WHERE path NOT IN (SELECT path FROM temp.remote)");
    // Directories first (a listing names a parent before its children), then the files, several at once.
    const root = db.row<{ tag: string }>("SELECT tag FROM temp.remote WHERE path = ''");
    if (root !== undefined) db.set("", { tag: root.tag, directory: true });
    for (const d of db.pages<{ path: string; tag: string }>("path, tag", "temp.remote", "directory = 1")) {
      if (this.signal.aborted) return;
      await this.makeDirectory(d.path, d.tag);
    }
    // What differs: missing from the sink (when it can tell), or of another tag than the one held.
    db.run(
      "CREATE TEMP TABLE IF NOT EXISTS todo (path TEXT PRIMARY KEY, tag TEXT NOT NULL, size INTEGER) WITHOUT ROWID",
    );
    db.run("DELETE FROM temp.todo");
    db.run(
      `INSERT INTO temp.todo (path, tag, size) SELECT r.path, r.tag, r.size FROM temp.remote r LEFT JOIN entries e ON e.path = r.path
       WHERE r.directory = 0 AND (e.tag IS NOT r.tag${listsItself ? " OR NOT EXISTS (SELECT 1 FROM temp.local l WHERE l.path = r.path AND l.directory = 0)" : ""})`,
    );
    const files = db.row<{ n: number }>("SELECT count(*) AS n FROM temp.remote WHERE directory = 0")?.n ?? 0;
    const todo = db.row<{ n: number }>("SELECT count(*) AS n FROM temp.todo")?.n ?? 0;
    counts.skipped += files - todo;
    // Small files by batches of one ReadMany each (as pull does), the others one GET each.
    const batchable = (r: TodoRow) =>
      this.batching && !this.dryRun && this.sink.writeBytes !== undefined && (r.size ?? 0) <= WHOLE_FILE_BYTES;
    await eachLimited(
      batchesOf(db.pages<TodoRow>("path, tag, size", "temp.todo"), batchable),
      this.transfers,
      async (group) => {
        if (this.signal.aborted) return;
        const [only] = group;
        if (group.length === 1 && only !== undefined && !batchable(only)) {
          if (await this.download(only.path, { tag: only.tag, size: only.size ?? undefined })) counts.written += 1;
        } else {
          // Not `counts.written += await …`: that reads the count before the await, and loses
          // what the batches in flight meanwhile add.
          const written = await this.downloadMany(group);
          counts.written += written;
        }
      },
      undefined,
      fileBudget((group) => group.reduce((n, r) => n + (r.size ?? 0), 0)),
    );
    if (!listed) db.delete("");
    // The scratch tables' temporary files are emptied: a following mirror keeps nothing of the tree.
    for (const table of ["remote", "local", "todo"]) db.run(`DELETE FROM temp.${table}`);
  }

  /** sync-recursive stores: walk down only into directories whose tag changed. */
  private async reconcileByTags(
    rel: string,
    counts: { written: number; removed: number; skipped: number },
  ): Promise<void> {
    const listing = await this.listDirectory(rel, false);
    if (!listing) {
      if (rel === "") await this.removeLocal("");
      return;
    }
    if (this.entries.get(rel)?.tag === listing.tag) {
      counts.skipped += 1;
      return;
    }
    const prefix = rel === "" ? "" : `${rel}/`;
    const names = new Set(listing.entries.filter((e) => !e.deleted).map((e) => prefix + e.name));
    for (const [p] of this.entries.children(rel)) {
      if (!names.has(p)) {
        await this.removeLocal(p);
        counts.removed += 1;
      }
    }
    for (const e of listing.entries) {
      if (this.signal.aborted) return;
      if (e.deleted) continue;
      const p = prefix + e.name;
      const known = this.entries.get(p);
      if (e.directory) {
        if (known?.directory && known.tag === e.tag) {
          counts.skipped += 1;
          continue;
        }
        if (!known?.directory) await this.makeDirectory(p, "");
        await this.reconcileByTags(p, counts);
        continue;
      }
      if (known && !known.directory && known.tag === e.tag) {
        counts.skipped += 1;
        continue;
      }
      if (await this.download(p, e)) counts.written += 1;
    }
    // Only now is everything below in sync with this tag.
    this.entries.set(rel, { tag: listing.tag, directory: true });
  }
}

export function mirror(options: MirrorOptions): StoreMirror {
  return new StoreMirror(options);
}

/** A row of the files to copy in a full resync. */
interface TodoRow {
  path: string;
  tag: string;
  size: number | null;
}

/**
 * The rows in order, as groups to copy: consecutive `batchable` rows by up to BATCH_FILES and
 * BATCH_BYTES (one ReadMany each), any other row alone.
 */
function* batchesOf(rows: Iterable<TodoRow>, batchable: (row: TodoRow) => boolean): Generator<TodoRow[]> {
  let group: TodoRow[] = [];
  let bytes = 0;
  for (const row of rows) {
    if (!batchable(row)) {
      yield [row];
      continue;
    }
    group.push(row);
    bytes += row.size ?? 0;
    if (group.length >= BATCH_FILES || bytes >= BATCH_BYTES) {
      yield group;
      group = [];
      bytes = 0;
    }
  }
  if (group.length > 0) yield group;
}
