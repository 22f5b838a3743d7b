// History on the resource core (docs/history.md): the versions of a resource, a version's or an
// earlier moment's contents, an earlier listing, and restores. ResourceCore's RPCs call it; the
// rules are domain/history.ts's, the states the storage port's (HistoryStorage).

import { setImmediate as nextTurn } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import {
  type ListRequest,
  type ListResponse,
  ListResponseSchema,
  type ListVersionsResponse,
  ListVersionsResponseSchema,
  type ReadResponse,
  ReadResponseSchema,
  type RestoreRequest,
  type RestoreResponse,
  RestoreResponseSchema,
  type Version,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { accessOf, type Caller, callerKey } from "../auth/caller.js";
import { BadRequestError, DeletedError, NotFoundError, PermissionDeniedError } from "../domain/errors.js";
import { tagMatches } from "../domain/etag.js";
import {
  type Moment,
  momentEvent,
  type PathState,
  parseMoment,
  type RestoreAction,
  restorableFile,
  restoreActions,
} from "../domain/history.js";
import { parentOf } from "../domain/path.js";
import { isExpiredTombstone } from "../domain/rules.js";
import type { NodeRecord, StoragePort, StoreRecord, VersionRecord } from "../storage/port.js";
import { requireOperation } from "./access.js";
import { throwIfCallAborted } from "./call-end.js";
import { fieldName } from "./field-names.js";
import { fileMessages } from "./read-contents.js";

export interface ResourceHistoryOptions {
  storage: StoragePort;
  now: () => number;
  /** The resource core's own conversion of a node into its message. */
  toResource: (node: NodeRecord, access?: ReturnType<typeof accessOf>) => NonNullable<ReadResponse["resource"]>;
}

/** Versions of a resource per message of ListVersions. */
const VERSIONS_PER_MESSAGE = 500;
/** A subtree restore compares this many paths between turns of the event loop. */
const PATHS_PER_TURN = 500;

export class ResourceHistory {
  constructor(private readonly options: ResourceHistoryOptions) {}

  private get storage(): StoragePort {
    return this.options.storage;
  }

  /** The store's record, or NotFoundError: a moment is checked against it. */
  private async liveStore(store: string): Promise<StoreRecord> {
    const record = await this.storage.getStore(store);
    if (!record || record.deleted) throw new NotFoundError(`store ${store} not found`);
    return record;
  }

  /** The event a moment names in a store, checked (400 not yet happened, 410 before the horizon). */
  /** The event of a moment (`as_of`, named as the calling face names it) in a live store. */
  async eventOf(store: string, text: string, ctx: HandlerContext): Promise<{ record: StoreRecord; event: number }> {
    const moment: Moment = parseMoment(text, fieldName(ctx, "as_of"));
    const record = await this.liveStore(store);
    const atTime = "time" in moment ? await this.storage.eventAt(store, moment.time) : undefined;
    return { record, event: momentEvent(record, moment, atTime) };
  }

  async *listVersions(store: string, path: string, ctx: HandlerContext): AsyncIterable<ListVersionsResponse> {
    const caller = ctx.values.get(callerKey);
    requireOperation(caller, "read", { store, path });
    const record = await this.liveStore(store);
    const now = this.options.now();
    let any = false;
    for await (const batch of this.storage.listVersions(store, path, { batchSize: VERSIONS_PER_MESSAGE })) {
      throwIfCallAborted(ctx);
      const versions: Version[] = [];
      for (const state of batch) {
        const current = state.endedEventId === 0;
        if (current && state.directory && !state.deleted) {
          throw new BadRequestError(`/${path} is a directory: versions are kept of resources; list it with as-of`);
        }
        // An expired tombstone is absent, as for a read; its earlier states are still kept.
        if (current && isExpiredTombstone(state, record.config, now)) continue;
        requireOperation(caller, "read", state);
        versions.push(this.version(state, current));
      }
      if (versions.length === 0) continue;
      any = true;
      yield create(ListVersionsResponseSchema, { versions });
    }
    if (!any) throw new NotFoundError(`/${path} not found in store ${store}: no state of it is kept`);
  }

  private version(state: VersionRecord, current: boolean): Version {
    return {
      $typeName: "trove.resources.v2.Version",
      // A deletion has no contents: its size, MD5 and blob are those of nothing (docs/history.md).
      resource: this.options.toResource(state.deleted ? { ...state, size: 0, md5: "", blob: "" } : state),
      user: state.user,
      operation: state.deleted ? "delete" : "modify",
      current,
      endedEventId: BigInt(state.endedEventId),
      endedMillis: BigInt(state.ended),
    };
  }

  /** A kept state's contents (Read with version). */
  async *readVersion(
    store: string,
    path: string,
    tag: string,
    ifNoneMatch: readonly string[],
    ctx: HandlerContext,
  ): AsyncIterable<ReadResponse> {
    const caller = ctx.values.get(callerKey);
    requireOperation(caller, "read", { store, path });
    await this.liveStore(store);
    const state = restorableFile(await this.storage.getVersion(store, path, tag), store, path, tag);
    requireOperation(caller, "read", state);
    yield* this.contentsOf(state, ifNoneMatch, ctx);
  }

  /** A path as it was at a moment (Read with as_of): a file's contents, or a directory's resource alone. */
  async *readAsOf(
    store: string,
    path: string,
    at: string,
    ifNoneMatch: readonly string[],
    ctx: HandlerContext,
  ): AsyncIterable<ReadResponse> {
    const caller = ctx.values.get(callerKey);
    requireOperation(caller, "read", { store, path });
    const { event } = await this.eventOf(store, at, ctx);
    const state = await this.storage.getNodeAsOf(store, path, event);
    if (!state) throw new NotFoundError(`/${path} did not exist in store ${store} at event ${event}`);
    if (state.deleted) throw new DeletedError(`/${path} was deleted at event ${event}`, state.tag);
    requireOperation(caller, "read", state);
    if (state.directory) {
      yield create(ReadResponseSchema, { resource: this.options.toResource(state) });
      return;
    }
    yield* this.contentsOf(state, ifNoneMatch, ctx);
  }

  private async *contentsOf(
    state: NodeRecord,
    ifNoneMatch: readonly string[],
    ctx: HandlerContext,
  ): AsyncIterable<ReadResponse> {
    yield* fileMessages(this.storage, state, this.options.toResource(state), ifNoneMatch, ctx);
  }

  /** A listing as it was at a moment (List with as_of). */
  async *listAsOf(req: ListRequest, store: string, path: string, ctx: HandlerContext): AsyncIterable<ListResponse> {
    const caller = ctx.values.get(callerKey);
    requireOperation(caller, "read", { store, path });
    const { event } = await this.eventOf(store, req.asOf, ctx);
    const dir = await this.storage.getNodeAsOf(store, path, event);
    if (!dir || dir.deleted)
      throw new NotFoundError(`/${path} was not a directory of store ${store} at event ${event}`);
    requireOperation(caller, "read", dir);
    if (!dir.directory) throw new NotFoundError(`/${path} was not a directory at event ${event}`);
    const access = (n: NodeRecord) => (req.includeAccess ? accessOf(caller, n) : undefined);
    const directory = this.options.toResource(dir, access(dir));
    if (req.ifNoneMatch.length > 0 && tagMatches(req.ifNoneMatch, dir.tag)) {
      yield create(ListResponseSchema, { directory, notModified: true });
      return;
    }
    yield create(ListResponseSchema, { directory });
    const options = { recursive: req.recursive, includeDeleted: req.includeDeleted };
    for await (const batch of this.storage.listNodesAsOf(store, path, event, options)) {
      throwIfCallAborted(ctx);
      const entries = batch
        .filter((n) => (req.includeDeleted || !n.deleted) && caller.may("read", n))
        .map((n) => this.options.toResource(n, access(n)));
      if (entries.length > 0) yield create(ListResponseSchema, { entries });
    }
  }

  async restore(req: RestoreRequest, store: string, path: string, ctx: HandlerContext): Promise<RestoreResponse> {
    if ((req.version === "") === (req.asOf === "")) {
      throw new BadRequestError({
        field: "version",
        reason: (name) =>
          `a restore names either a version of a resource (${name}) or a moment of a subtree (${name === "version" ? "as_of" : "restore-as-of"})`,
      });
    }
    const caller = ctx.values.get(callerKey);
    if (req.version !== "") {
      if (req.dryRun) {
        throw new BadRequestError({ field: "dry_run", reason: (name) => `${name} is for the restore of a subtree` });
      }
      requireOperation(caller, "write", { store, path });
      const pre = req.ifMatch.length > 0 ? { ifMatch: req.ifMatch } : {};
      const { node, created } = await this.storage.restoreVersion(
        store,
        path,
        req.version,
        pre,
        this.options.now(),
        caller.subject,
      );
      return create(RestoreResponseSchema, { resource: this.options.toResource(node), created });
    }
    if (req.ifMatch.length > 0) {
      throw new BadRequestError({ field: "if_match", reason: (name) => `${name} is for the restore of one version` });
    }
    const { event } = await this.eventOf(store, req.asOf, ctx);
    const plan = await this.planSubtree(caller, store, path, event, ctx);
    if (!req.dryRun) {
      for (const action of plan) {
        throwIfCallAborted(ctx);
        await this.apply(store, action, caller.subject);
        // SQLite's writes settle without I/O: without a turn of the event loop between changes, a
        // restore of 1,000 resources held the process for its whole length (1.2 s), answering no
        // other request, health probe or long poll, whose followers saw its changes only at the end.
        await nextTurn();
      }
    }
    return create(RestoreResponseSchema, {
      asOfEventId: BigInt(event),
      changes: plan.map((a) => ({ path: a.path, operation: a.operation, directory: a.directory })),
    });
  }

  /**
   * The changes that take a subtree back to event E, in the order to make them: the directory's
   * missing ancestors first, then each path below in path order (restoreActions). Every change is
   * checked against the caller's grants before any is made.
   */
  private async planSubtree(
    caller: Caller,
    store: string,
    path: string,
    event: number,
    ctx: HandlerContext,
  ): Promise<RestoreAction[]> {
    requireOperation(caller, "read", { store, path });
    const root = await this.storage.getNodeAsOf(store, path, event);
    if (!root || root.deleted || !root.directory) {
      throw new NotFoundError(`/${path} was not a directory of store ${store} at event ${event}`);
    }
    const plan: RestoreAction[] = [];
    // Ancestors (and the directory) that are not live directories now: made again, top down.
    const chain: string[] = [];
    for (let at: string | undefined = path; at !== undefined && at !== ""; at = parentOf(at)) chain.unshift(at);
    const deleted = new Set<string>();
    for (const at of chain) {
      const now = (await this.storage.getStoreNode(store, at, { contents: false }))?.node;
      const then = at === path ? root : { ...root, path: at, directory: true, deleted: false };
      plan.push(...restoreActions(at, stateOf(then), now && stateOf(now), deleted));
    }
    const thenPages = this.storage
      .listNodesAsOf(store, path, event, { recursive: true, includeDeleted: false })
      [Symbol.asyncIterator]();
    const nowPages = this.storage
      .listNodes(store, path, { recursive: true, includeDeleted: false })
      [Symbol.asyncIterator]();
    let compared = 0;
    for await (const [then, now] of mergeByPath(thenPages, nowPages)) {
      // As for the changes (restore): the listings' pages are read without I/O on SQLite.
      if (++compared % PATHS_PER_TURN === 0) await nextTurn();
      throwIfCallAborted(ctx);
      for (const action of restoreActions(
        (then ?? now)?.path ?? "",
        then && stateOf(then),
        now && stateOf(now),
        deleted,
      )) {
        if (action.operation === "delete" && action.directory) deleted.add(action.path);
        plan.push(action);
      }
    }
    for (const action of plan) {
      const operation = action.operation === "delete" ? "delete" : "write";
      if (!caller.may(operation, { store, path: action.path, directory: action.directory })) {
        throw new PermissionDeniedError(
          `${caller.subject} may not ${operation} /${action.path} in store ${store}, which the restore would change: nothing was restored`,
        );
      }
    }
    return plan;
  }

  private async apply(store: string, action: RestoreAction, user: string): Promise<void> {
    const now = this.options.now();
    const ifMatch = action.currentTag === undefined ? {} : { ifMatch: [action.currentTag] };
    if (action.operation === "delete") {
      await this.storage.deleteTree(store, action.path, ifMatch, now, user);
    } else if (action.directory) {
      await this.storage.makeDirectory(store, action.path, {}, now, user);
    } else {
      await this.storage.restoreVersion(store, action.path, action.versionTag ?? "", ifMatch, now, user);
    }
  }
}

function stateOf(n: NodeRecord): PathState {
  return {
    path: n.path,
    directory: n.directory,
    deleted: n.deleted,
    tag: n.tag,
    md5: n.md5,
    size: n.size,
    type: n.type,
  };
}

/** Path order as the storages sort paths: by their UTF-8 bytes (not JavaScript's UTF-16 units). */
function comparePaths(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** Two listings in path order, joined on the path: [then, now] pairs, either side absent. */
async function* mergeByPath(
  a: AsyncIterator<NodeRecord[]>,
  b: AsyncIterator<NodeRecord[]>,
): AsyncIterable<[NodeRecord | undefined, NodeRecord | undefined]> {
  const reader = (it: AsyncIterator<NodeRecord[]>) => {
    let page: NodeRecord[] = [];
    let at = 0;
    let done = false;
    return {
      async peek(): Promise<NodeRecord | undefined> {
        while (!done && at >= page.length) {
          const next = await it.next();
          if (next.done) done = true;
          else {
            page = next.value;
            at = 0;
          }
        }
        return done ? undefined : page[at];
      },
      take(): void {
        at++;
      },
      async close(): Promise<void> {
        if (!done) await it.return?.();
      },
    };
  };
  const then = reader(a);
  const now = reader(b);
  try {
    for (;;) {
      const x = await then.peek();
      const y = await now.peek();
      if (!x && !y) return;
      const order = x && y ? comparePaths(x.path, y.path) : 0;
      if (x && (!y || order < 0)) {
        then.take();
        yield [x, undefined];
      } else if (y && (!x || order > 0)) {
        now.take();
        yield [undefined, y];
      } else {
        then.take();
        now.take();
        yield [x, y];
      }
    }
  } finally {
    await then.close();
    await now.close();
  }
}
