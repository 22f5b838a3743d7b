// ChangeService: the change feed behind GET /resources/v2/poll and the
// WatchChanges stream.

import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type ChangeService,
  type Cursor,
  type Event,
  EventSchema,
  Operation,
  type PollRequest,
  type PollResponse,
  PollResponseSchema,
  type WatchChangesRequest,
  type WatchChangesResponse,
  WatchChangesResponseSchema,
} from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { type Caller, callerKey, rootOf } from "../auth/caller.js";
import { BadRequestError, UnavailableError } from "../domain/errors.js";
import { idrUri, positionOf } from "../domain/events.js";
import { validateStoreName } from "../domain/path.js";
import type { NodeRecord, StoragePort } from "../storage/port.js";
import { requireOperation } from "./access.js";
import { abortedCallError, throwIfCallAborted } from "./call-end.js";
import type { CallEnd, ChangeNotifier, WaitEnd, Waiter, WaitTarget } from "./change-notifier.js";

export interface ChangeServiceOptions {
  storage: StoragePort;
  notifier: ChangeNotifier;
  /** Longest a poll waits for an event, in milliseconds (the spec's 30 s). */
  pollWait?: number;
  /** Most events in one answer; a follower with more to read polls again at once. */
  maxEvents?: number;
}

export const DEFAULT_POLL_WAIT = 30_000;

/** How a watch ends when the server shuts down (UNAVAILABLE). */
export const SHUTTING_DOWN_RECONNECT = "the server is shutting down: reconnect, to another instance if there is one";
const DEFAULT_HEARTBEAT = 15_000;

function changeEvent(node: NodeRecord): Event {
  return create(EventSchema, {
    kind: {
      case: "change",
      value: {
        store: node.store,
        eventId: BigInt(node.eventId),
        path: node.path,
        uri: idrUri(node.store, node.path),
        operation: node.deleted ? Operation.DELETE : Operation.MODIFY,
        previousTag: node.prevTag,
        tag: node.tag,
        type: node.directory ? "" : node.type,
        directory: node.directory,
        user: node.user ?? "",
        // A file's and a tombstone's modified time is their event's; a live directory's is its
        // own last change, not a re-tag's (docs/change-feed.md, "Event times").
        timeMillis: node.directory && !node.deleted ? 0n : BigInt(node.modified),
      },
    },
  });
}

function resetEvent(store: string, eventId: number): Event {
  return create(EventSchema, { kind: { case: "reset", value: { store, eventId: BigInt(eventId) } } });
}

/** Validates cursors into a map from store to the last event id applied. */
export function cursorMap(cursors: readonly Pick<Cursor, "store" | "eventId">[]): Map<string, number> {
  const map = new Map<string, number>();
  for (const c of cursors) {
    const store = validateStoreName(c.store);
    if (map.has(store)) throw new BadRequestError(`store ${store} given twice`);
    if (c.eventId < 0n || c.eventId > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new BadRequestError(`event id of store ${store} out of range`);
    }
    map.set(store, Number(c.eventId));
  }
  return map;
}

/** Cursors of stores the caller may read something in; following any other store is refused. */
function followable(cursors: Map<string, number>, caller: Caller): Map<string, number> {
  for (const store of cursors.keys()) requireOperation(caller, "read", rootOf(store));
  return cursors;
}

/** Moves cursors past what a batch of events delivered. */
export function advance(cursors: Map<string, number>, events: readonly Event[]): void {
  for (const e of events) {
    if (e.kind.case === "change" || e.kind.case === "reset")
      cursors.set(e.kind.value.store, Number(e.kind.value.eventId));
  }
}

/** Whom a poll answers: the REST route's parked poll, or the promise of `pollEvents`. */
export interface PollAnswer {
  /** The events after the cursors (none: the wait ended without any the caller may see, or the call ended). */
  answer(events: Event[]): void;
  fail(err: unknown): void;
}

/**
 * A poll in progress. While it waits it is this object and its waiter (the notifier's sets and
 * deadline heap hold them): no async frame, promise or closure of its own (issue 14).
 */
class PendingPoll implements WaitTarget {
  waiter: Waiter | undefined = undefined;
  /** The cursors: stores followed, and the last event id applied of each (two arrays cost less than a Map). */
  readonly stores: string[];
  readonly positions: number[];

  constructor(
    private readonly core: ChangeCore,
    cursors: ReadonlyMap<string, number>,
    readonly caller: Caller,
    readonly deadline: number,
    readonly signal: CallEnd,
    readonly to: PollAnswer,
  ) {
    this.stores = [...cursors.keys()];
    this.positions = [...cursors.values()];
  }

  waited(end: WaitEnd): void {
    this.waiter?.dispose();
    this.waiter = undefined;
    if (end === "aborted") this.to.answer([]);
    else this.core.step(this);
  }
}

export class ChangeCore implements ServiceImpl<typeof ChangeService> {
  private readonly storage: StoragePort;
  private readonly notifier: ChangeNotifier;
  readonly pollWait: number;
  private readonly maxEvents: number;
  /** Reads in flight, by notifier generation, store and position (shared). */
  private readonly reads = new Map<string, Promise<unknown>>();

  constructor(options: ChangeServiceOptions) {
    this.storage = options.storage;
    this.notifier = options.notifier;
    this.pollWait = options.pollWait ?? DEFAULT_POLL_WAIT;
    this.maxEvents = options.maxEvents ?? 1000;
  }

  async poll(req: PollRequest, ctx: HandlerContext): Promise<PollResponse> {
    const events = await this.pollEvents(req.cursors, req.waitMillis, ctx.values.get(callerKey), ctx.signal);
    // The client went away while the poll waited: it ends as the call's abort says.
    if (events.length === 0 && req.cursors.length > 0) throwIfCallAborted(ctx);
    return create(PollResponseSchema, { events });
  }

  /**
   * The poll itself, for the RPC face: the events after the cursors, waiting up to `waitMillis`
   * (0: the server's poll wait) for some; what there is (possibly none) when `signal` aborts.
   */
  pollEvents(
    requested: readonly Pick<Cursor, "store" | "eventId">[],
    waitMillis: number,
    caller: Caller,
    signal: CallEnd,
  ): Promise<Event[]> {
    return new Promise((resolve, reject) =>
      this.startPoll(requested, waitMillis, caller, signal, { answer: resolve, fail: reject }),
    );
  }

  /**
   * The poll for faces that keep nothing of their own while it waits (REST): as `pollEvents`, but
   * tells `to` the answer. Throws at once for cursors it refuses (malformed, not readable); `to`
   * is told later, never during this call.
   */
  startPoll(
    requested: readonly Pick<Cursor, "store" | "eventId">[],
    waitMillis: number,
    caller: Caller,
    signal: CallEnd,
    to: PollAnswer,
  ): void {
    const cursors = followable(cursorMap(requested), caller);
    if (cursors.size === 0) {
      this.status(caller).then(
        (events) => to.answer(events),
        (err: unknown) => to.fail(err),
      );
      return;
    }
    const wait = waitMillis === 0 ? this.pollWait : Math.min(waitMillis, this.pollWait);
    this.step(new PendingPoll(this, cursors, caller, Date.now() + wait, signal, to));
  }

  /** One turn of a poll: arm its waiter, read, then answer or wait (`collected`). */
  step(poll: PendingPoll): void {
    poll.waiter = this.notifier.arm(poll.stores);
    this.collect(poll.stores, poll.positions, poll.caller)
      .then((events) => this.collected(poll, events))
      .catch((err: unknown) => {
        poll.waiter?.dispose();
        poll.to.fail(err);
      });
  }

  private collected(poll: PendingPoll, events: Event[]): void {
    const waiter = poll.waiter as Waiter;
    const left = poll.deadline - Date.now();
    // Events found are the answer even at the deadline: the client may still take them. Once
    // the server's shutdown began, a poll answers what there is at once (none: 204).
    if (events.length > 0 || left <= 0 || this.notifier.shuttingDown) {
      waiter.dispose();
      poll.to.answer(events);
      return;
    }
    // Parked: from here until the wait ends, the poll is its PendingPoll and its waiter.
    waiter.waitThen(left, poll.signal, poll);
  }

  async *watchChanges(req: WatchChangesRequest, ctx: HandlerContext): AsyncIterable<WatchChangesResponse> {
    const caller = ctx.values.get(callerKey);
    const cursors = followable(cursorMap(req.cursors), caller);
    const heartbeat = req.heartbeatMillis === 0 ? DEFAULT_HEARTBEAT : Math.max(100, req.heartbeatMillis);
    if (cursors.size === 0) {
      const events = await this.status(caller);
      advance(cursors, events);
      yield create(WatchChangesResponseSchema, { events });
    }
    while (!ctx.signal.aborted) {
      const stores = [...cursors.keys()];
      const waiter = this.notifier.arm(stores);
      try {
        const events = await this.collect(stores, [...cursors.values()], caller);
        if (events.length > 0) {
          advance(cursors, events);
          yield create(WatchChangesResponseSchema, { events });
          continue;
        }
        // Shutdown: the watch ends with UNAVAILABLE, which clients take as "reconnect" (to another instance).
        if (this.notifier.shuttingDown) throw new UnavailableError(SHUTTING_DOWN_RECONNECT);
        const end = await waiter.wait(heartbeat, ctx.signal);
        if (end === "timeout") yield create(WatchChangesResponseSchema, { heartbeat: true });
      } finally {
        waiter.dispose();
      }
    }
    // A watch has no end of its own: it ends when its deadline runs out or its client cancels.
    throw abortedCallError(ctx);
  }

  /** The current event id of every store the caller may read, as reset events. */
  private async status(caller: Caller): Promise<Event[]> {
    const stores = await this.storage.listStores();
    return stores
      .filter((s) => caller.may("read", rootOf(s.config.name)))
      .map((s) => resetEvent(s.config.name, s.lastEventId));
  }

  /**
   * One read for every poll woken by the same change: a read already in flight is joined, but only
   * when no change was signalled since it began (the notifier's generation), so a poll never takes
   * the answer of a read made before it armed its waiter and before a change it was not woken for.
   * The results are shared read-only; each poll filters them for its caller.
   */
  private shared<T>(key: string, read: () => Promise<T>): Promise<T> {
    const generation = this.notifier.generation;
    const fullKey = `${generation}|${key}`;
    const found = this.reads.get(fullKey) as Promise<T> | undefined;
    if (found) return found;
    const started = read();
    this.reads.set(fullKey, started);
    const forget = () => {
      this.reads.delete(fullKey);
    };
    started.then(forget, forget);
    return started;
  }

  /** The events after each store's position (`positions[i]` of `stores[i]`) the caller may see. */
  private async collect(stores: readonly string[], positions: readonly number[], caller: Caller): Promise<Event[]> {
    const events: Event[] = [];
    for (let i = 0; i < stores.length; i++) {
      const store = stores[i] as string;
      const cursor = positions[i] as number;
      if (events.length >= this.maxEvents) break;
      const position = positionOf(await this.shared(`s|${store}`, () => this.storage.getStore(store)), cursor);
      if ("reset" in position) {
        events.push(resetEvent(store, position.reset));
        continue;
      }
      // Changes the caller may not see do not count against the limit: read on until it has as
      // many as it may see, or the end. Otherwise a follower whose next changes are all hidden
      // from it would be answered nothing, forever, from the same cursor.
      for (let since = position.since; ; ) {
        const want = this.maxEvents - events.length;
        const nodes = await this.shared(`c|${store}|${since}|${want}`, () =>
          this.storage.changesSince(store, since, want),
        );
        for (const node of nodes) if (caller.may("read", node)) events.push(changeEvent(node));
        const last = nodes.at(-1);
        if (last === undefined || nodes.length < want || events.length >= this.maxEvents) break;
        since = last.eventId;
      }
    }
    return events;
  }
}
