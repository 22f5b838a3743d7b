// ResourceService: the core every face calls for resources and directories.

import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type DeleteRequest,
  type DeleteResponse,
  DeleteResponseSchema,
  type ListRequest,
  type ListResponse,
  ListResponseSchema,
  type ListVersionsRequest,
  type ListVersionsResponse,
  type MakeDirectoryRequest,
  type MakeDirectoryResponse,
  MakeDirectoryResponseSchema,
  type ReadManyRequest,
  type ReadRequest,
  type ReadResponse,
  type Resource,
  type ResourceService,
  type RestoreRequest,
  type RestoreResponse,
  type StatRequest,
  type StatResponse,
  type WriteHeader,
  type WriteManyRequest,
  type WriteRequest,
  type WriteResponse,
  WriteResponseSchema,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { accessOf, callerKey, type Operation } from "../auth/caller.js";
import {
  BadRequestError,
  DeletedError,
  isServerStateError,
  NotEmptyError,
  NotFoundError,
  PreconditionFailedError,
  TooLargeError,
} from "../domain/errors.js";
import { parseTagList, tagMatches } from "../domain/etag.js";
import { isMediaType, typeFromName } from "../domain/mime.js";
import { nameOf, parsePath, validateStoreName } from "../domain/path.js";
import { isExpiredTombstone, planPutFile, type TagConditions } from "../domain/rules.js";
import type { StoreConfig } from "../domain/store.js";
import {
  type BlobInfo,
  type DeleteResult,
  type NodeRecord,
  putEach,
  type StoragePort,
  type StoreNode,
} from "../storage/port.js";
import { requireOperation } from "./access.js";
import { throwIfCallAborted } from "./call-end.js";
import { fieldName, inFaceNames } from "./field-names.js";
import { directoryMessage, fileMessages, messageNow } from "./read-contents.js";
import { ResourceHistory } from "./resource-history.js";

/** Largest chunk of a Read message (read-contents.ts). */
export { READ_MESSAGE_CHUNK } from "./read-contents.js";

/**
 * Uploads announced at up to this many bytes skip the check before the upload: storing the
 * resource checks the same atomically, and receiving a few KiB costs less than the round trip the
 * check makes on a networked database (docs/benchmarks.md, "MongoDB round trips"). It is also
 * the storages' inline limit: a refused small upload is held in memory, not written to a file
 * (but on a filesystem store, whose putFile removes it).
 */
export const UNCHECKED_UPLOAD_MAX = 64 * 1024;

/** A directory refused by a delete with require_empty: its entries are counted up to this many. */
const NOT_EMPTY_COUNT_LIMIT = 10_000;
/** Tries of a delete with require_empty whose directory keeps changing under it. */
const NOT_EMPTY_ATTEMPTS = 5;

// Base64 of a 16-byte digest, padded (RFC 1864): Buffer.from would skip junk and decode it anyway.
const CONTENT_MD5 = /^[A-Za-z0-9+/]{21}[AQgw]==$/;

export interface ResourceServiceOptions {
  storage: StoragePort;
  /** Largest resource accepted, in bytes. */
  maxResourceSize: number;
  now?: () => number;
}

export function toResource(node: NodeRecord, access?: readonly Operation[]): Resource {
  // The message create(ResourceSchema, ...) would build (proto3: a plain object, every field
  // set), written out: create walks the schema for each field, a cost paid on every read.
  return {
    $typeName: "trove.resources.v2.Resource",
    store: node.store,
    path: node.path,
    name: nameOf(node.path),
    directory: node.directory,
    deleted: node.deleted,
    tag: node.tag,
    type: node.type,
    size: BigInt(node.size),
    md5: node.md5,
    blob: node.blob,
    createdMillis: BigInt(node.created),
    lastModifiedMillis: BigInt(node.modified),
    eventId: BigInt(node.eventId),
    access: access ? [...access] : [],
  };
}

/** What every face gives ResourceCore.put: a write's target, its preconditions (parsed) and its contents. */
export interface WriteInput {
  store: string;
  path: string;
  /** If-Match, parsed (parseTagList: stored form, "*" kept); empty: none. */
  ifMatch: readonly string[];
  /** If-None-Match, parsed as ifMatch ("*": a conditional create); empty: none. */
  ifNoneMatch: readonly string[];
  /** The media type; empty: from the name's extension. */
  contentType: string;
  /** Base64 MD5 the contents must have; empty: none. */
  contentMd5: string;
  /** The announced length, checked against what arrives. */
  contentLength: bigint | undefined;
  contents: AsyncIterable<Uint8Array>;
}

/** What every face gives ResourceCore.readNow: a read's target, its If-None-Match (parsed as WriteInput's) and history coordinates. */
export interface ReadInput {
  store: string;
  path: string;
  ifNoneMatch: readonly string[];
  /** A kept state's tag (docs/history.md); empty: the current state. */
  version: string;
  /** A moment (docs/history.md); empty: now. */
  asOf: string;
}

/** What every face gives ResourceCore.mkdir: a directory's target and its preconditions, parsed as WriteInput's. */
export interface DirectoryInput {
  store: string;
  path: string;
  ifMatch: readonly string[];
  ifNoneMatch: readonly string[];
}

/** What every face gives ResourceCore.remove: a delete's target, its If-Match (parsed as WriteInput's) and its mode. */
export interface DeleteInput {
  store: string;
  path: string;
  ifMatch: readonly string[];
  /** A directory is deleted only when nothing live is below it (REST v1's DELETE, the RPC's require_empty). */
  requireEmpty: boolean;
}

/** At most this many paths in one ReadMany (the request is refused beyond, before any is read). */
export const READ_MANY_MAX_PATHS = 1000;

/** One path's part of a ReadMany: a Read message of it, or the error that ends its answer. */
export type ReadManyItem = { index: number; read: ReadResponse } | { index: number; error: unknown };

/** How storeContents writes a file's contents: its type, conditions, announced length and MD5, and who writes. */
export interface ContentsOptions {
  type: string;
  ifMatch: readonly string[];
  /** If-None-Match ("*": a conditional create); empty: none. */
  ifNoneMatch?: readonly string[];
  contentLength?: bigint | undefined;
  contentMd5?: string;
  /** Who writes (the caller's subject): recorded with the new state (docs/history.md). */
  user?: string;
}

/** At most this many items in one WriteMany (the request is refused beyond, before any is written). */
export const WRITE_MANY_MAX_ITEMS = 1000;

/** One item's answer of a WriteMany: what Write would answer, or why it was not written. */
export type WriteManyOutcome = { write: WriteResponse } | { error: unknown };

/**
 * Every method of ResourceService but ReadMany and WriteMany, whose per-item errors the RPC face
 * translates (src/rpc/connect-routes.ts) from `readEach` and `writeEach`.
 */
export class ResourceCore implements Omit<ServiceImpl<typeof ResourceService>, "readMany" | "writeMany"> {
  private readonly storage: StoragePort;
  private readonly maxResourceSize: number;
  private readonly now: () => number;

  private readonly history: ResourceHistory;

  constructor(options: ResourceServiceOptions) {
    this.storage = options.storage;
    this.maxResourceSize = options.maxResourceSize;
    this.now = options.now ?? Date.now;
    this.history = new ResourceHistory({
      storage: this.storage,
      now: this.now,
      toResource,
    });
  }

  /**
   * Stat, answered at once when the storage reads synchronously (SQLite: no promise, issue 32),
   * else a promise; every face calls this one method.
   */
  stat(req: StatRequest, ctx: HandlerContext): StatResponse | Promise<StatResponse> {
    const { store, path } = this.target(req);
    const caller = ctx.values.get(callerKey);
    requireOperation(caller, "read", { store, path });
    const found = this.storage.getStoreNode(store, path, { contents: false });
    const answer = (f: StoreNode | undefined): StatResponse => {
      const { node } = this.visibleIn(store, path, f);
      requireOperation(caller, "read", node);
      return { $typeName: "trove.resources.v2.StatResponse", resource: toResource(node) };
    };
    return found instanceof Promise ? found.then(answer) : answer(found);
  }

  /** Read as the RPC faces call it: its tags parsed into `readNow`'s input, its messages whether answered at once or not. */
  async *read(req: ReadRequest, ctx: HandlerContext): AsyncIterable<ReadResponse> {
    const { store, path, version, asOf } = req;
    const answer = this.readNow({ store, path, ifNoneMatch: tags(req.ifNoneMatch), version, asOf }, ctx);
    if (isMessage(answer)) yield answer;
    else yield* answer;
  }

  /**
   * A read, from any face (issue 32): its one message at once when the storage reads
   * synchronously (SQLite) and the answer is known from the node (a directory, "not modified",
   * contents kept inline: the common small read, with no asynchronous hop, stream or closure),
   * else the messages to come (a blob's chunks, a history read, a networked storage's answer).
   * The decision and its checks are the same either way.
   */
  readNow(input: ReadInput, ctx: HandlerContext): ReadResponse | AsyncIterable<ReadResponse> {
    const { store, path } = this.target(input);
    if (input.version !== "" || input.asOf !== "") return this.readHistory(input, store, path, ctx);
    const caller = ctx.values.get(callerKey);
    requireOperation(caller, "read", { store, path });
    const { ifNoneMatch } = input;
    // A conditional read is usually answered "not modified": it reads the contents only when
    // it sends them, through readBlob.
    const contents = ifNoneMatch.length === 0;
    const found = this.storage.getStoreNode(store, path, { contents });
    if (found instanceof Promise) return this.readFile(store, path, contents, ifNoneMatch, ctx, found);
    const { node } = this.visibleIn(store, path, found);
    requireOperation(caller, "read", node);
    const resource = toResource(node);
    if (node.directory) return directoryMessage(resource);
    return messageNow(node, resource, ifNoneMatch) ?? this.readFile(store, path, contents, ifNoneMatch, ctx, found);
  }

  /**
   * ReadMany's answers (issue 31): each path read by `readNow` in turn, with its decision, as a
   * Read of it would be; a path's failure is its item (the others go on), a call cancelled or out
   * of time stops between messages. Refused as a whole, before any read, beyond
   * READ_MANY_MAX_PATHS or without a store.
   */
  async *readEach(req: ReadManyRequest, ctx: HandlerContext): AsyncIterable<ReadManyItem> {
    const { store, paths } = req;
    if (paths.length > READ_MANY_MAX_PATHS) {
      throw new BadRequestError(`a ReadMany names at most ${READ_MANY_MAX_PATHS} paths, not ${paths.length}`);
    }
    validateStoreName(store);
    for (let index = 0; index < paths.length; index++) {
      throwIfCallAborted(ctx);
      const input: ReadInput = { store, path: paths[index] as string, ifNoneMatch: [], version: "", asOf: "" };
      try {
        const answer = this.readNow(input, ctx);
        if (isMessage(answer)) yield { index, read: answer };
        else for await (const read of answer) yield { index, read };
      } catch (error) {
        throwIfCallAborted(ctx);
        yield { index, error };
      }
    }
  }

  /**
   * WriteMany's items, each written as `put` writes a Write of its whole contents (the same
   * decision, checks and preconditions), one after the other in the request's order; an item's
   * refusal is its outcome and the next item follows. Refused whole, before any write, with more
   * than WRITE_MANY_MAX_ITEMS items or without a store; ended by a refusal of the server's state
   * (read-only, unavailable, out of space). Each item is its own atomic write.
   */
  async writeEach(req: WriteManyRequest, ctx: HandlerContext): Promise<WriteManyOutcome[]> {
    const { store, items } = req;
    if (items.length > WRITE_MANY_MAX_ITEMS) {
      throw new BadRequestError(`a WriteMany holds at most ${WRITE_MANY_MAX_ITEMS} items, not ${items.length}`);
    }
    validateStoreName(store);
    const outcomes = new Array<WriteManyOutcome>(items.length);
    // Each item checked and received as `put` does; those ready are then committed together.
    const ready: { at: number; file: { path: string; blob: BlobInfo; type: string; pre: TagConditions } }[] = [];
    // Before the commit, a refusal of the whole call leaves the blobs received unreferenced: discarded.
    const giveUp = async (error?: unknown) => {
      for (const { file } of ready) await this.storage.discardBlob(file.blob);
      throwIfCallAborted(ctx);
      throw inFaceNames(error, ctx);
    };
    for (const [at, item] of items.entries()) {
      if (ctx.signal.aborted) await giveUp();
      try {
        const { path, options } = this.writeOf(
          {
            store,
            path: item.path,
            ifMatch: tags(item.ifMatch),
            ifNoneMatch: tags(item.ifNoneMatch),
            contentType: item.contentType,
            contentMd5: item.contentMd5,
            contentLength: BigInt(item.contents.byteLength),
          },
          ctx,
        );
        const { blob, pre } = await this.receive(store, path, only(item.contents), { ...options, received: true });
        ready.push({ at, file: { path, blob, type: options.type, pre } });
      } catch (error) {
        if (isServerStateError(error)) await giveUp(error);
        outcomes[at] = { error: inFaceNames(error, ctx) };
      }
    }
    if (ctx.signal.aborted) await giveUp();
    const files = ready.map((r) => r.file);
    const user = ctx.values.get(callerKey).subject;
    const answers = this.storage.putFiles
      ? await this.storage.putFiles(store, files, this.now(), user)
      : await putEach(this.storage, store, files, this.now(), user);
    for (const [i, answer] of answers.entries()) {
      const { at } = ready[i] as (typeof ready)[number];
      if ("error" in answer) {
        // A refusal of the server's or the store's state (read-only, a database away, a full disk,
        // a filesystem store's contents not in its folder): the call's refusal, as putEach's.
        if (isServerStateError(answer.error)) throw inFaceNames(answer.error, ctx);
        outcomes[at] = { error: inFaceNames(answer.error, ctx) };
        continue;
      }
      const { node, created } = answer.result;
      outcomes[at] = { write: create(WriteResponseSchema, { resource: toResource(node), created }) };
    }
    return outcomes;
  }

  /** The messages of a read from `first`, the node's first read (a blob replaced meanwhile: the node is read again). */
  private async *readFile(
    store: string,
    path: string,
    contents: boolean,
    ifNoneMatch: readonly string[],
    ctx: HandlerContext,
    first: StoreNode | undefined | Promise<StoreNode | undefined>,
  ): AsyncIterable<ReadResponse> {
    const caller = ctx.values.get(callerKey);
    for (let attempt = 0; ; attempt++) {
      const found = attempt === 0 ? await first : await this.storage.getStoreNode(store, path, { contents });
      const { node } = this.visibleIn(store, path, found);
      requireOperation(caller, "read", node);
      const resource = toResource(node);
      if (node.directory) {
        yield directoryMessage(resource);
        return;
      }
      // A blob replaced between reading the metadata and opening it: read the node again.
      if (yield* fileMessages(this.storage, node, resource, ifNoneMatch, ctx, attempt < 2)) return;
    }
  }

  /** A read of a version or a moment (docs/history.md). */
  private async *readHistory(
    input: ReadInput,
    store: string,
    path: string,
    ctx: HandlerContext,
  ): AsyncIterable<ReadResponse> {
    if (input.version !== "" && input.asOf !== "") {
      throw new BadRequestError("a read names a version or an as_of moment, not both");
    }
    yield* input.version !== ""
      ? this.history.readVersion(store, path, input.version, input.ifNoneMatch, ctx)
      : this.history.readAsOf(store, path, input.asOf, input.ifNoneMatch, ctx);
  }

  /** Write as the RPC faces call it: its messages adapted into the write input every face gives `put`. */
  async write(requests: AsyncIterable<WriteRequest>, ctx: HandlerContext): Promise<WriteResponse> {
    const iterator = requests[Symbol.asyncIterator]();
    const first = await iterator.next();
    if (first.done || first.value.part.case !== "header") {
      throw new BadRequestError("the first message of a write must be its header");
    }
    const header: WriteHeader = first.value.part.value;
    return this.put(
      {
        store: header.store,
        path: header.path,
        ifMatch: tags(header.ifMatch),
        ifNoneMatch: tags(header.ifNoneMatch),
        contentType: header.contentType,
        contentMd5: header.contentMd5,
        contentLength: header.contentLength,
        contents: chunksOf(iterator),
      },
      ctx,
    );
  }

  /**
   * A client's write of a resource's contents, from any face (issue 32): REST passes the request
   * body and the preconditions it parsed from its headers, the RPC faces their Write messages
   * (`write`). Nothing is wrapped in a message per chunk, and the tags are parsed once, by the face.
   */
  async put(input: WriteInput, ctx: HandlerContext): Promise<WriteResponse> {
    const { store, path, options } = this.writeOf(input, ctx);
    return this.storeContents(store, path, input.contents, options).catch((err) => {
      throw inFaceNames(err, ctx);
    });
  }

  /** What a write's input asks for, checked before any of its contents is received: the caller's grant, the type, the MD5, the size. */
  private writeOf(input: Omit<WriteInput, "contents">, ctx: HandlerContext) {
    const { store, path } = this.target(input);
    if (path === "") throw new BadRequestError("a resource needs a name; the root is a directory");
    requireOperation(ctx.values.get(callerKey), "write", { store, path });
    const type = input.contentType === "" ? typeFromName(nameOf(path)) : input.contentType;
    if (!isMediaType(type)) {
      throw new BadRequestError(`invalid ${fieldName(ctx, "content_type")} ${JSON.stringify(type)}`);
    }
    if (input.contentMd5 !== "" && !CONTENT_MD5.test(input.contentMd5)) {
      throw new BadRequestError(`${fieldName(ctx, "content_md5")} must be the base64 text of a 16-byte MD5 digest`);
    }
    if (input.contentLength !== undefined && input.contentLength > BigInt(this.maxResourceSize)) {
      throw new TooLargeError(
        `contents of ${input.contentLength} bytes exceed the limit of ${this.maxResourceSize} bytes`,
      );
    }
    const options = {
      type,
      user: ctx.values.get(callerKey).subject,
      ifMatch: input.ifMatch,
      ifNoneMatch: input.ifNoneMatch,
      contentLength: input.contentLength,
      contentMd5: input.contentMd5,
    };
    return { store, path, options };
  }

  /**
   * The one write path of a file's contents (a client's write, a promotion): checks what can be
   * checked before the upload, streams the contents into a blob, and stores the resource atomically
   * with its precondition (putFile owns the blob from then on). Access is the caller's check;
   * so is naming the fields of what it throws as the caller's face does (inFaceNames). An upload
   * announced as small (UNCHECKED_UPLOAD_MAX) is received before any check: putFile's refusal
   * (404, 412, 403) is then the answer, with the same reason, and nothing is stored.
   */
  async storeContents(
    store: string,
    path: string,
    contents: AsyncIterable<Uint8Array>,
    options: ContentsOptions,
  ): Promise<WriteResponse> {
    const { blob, pre } = await this.receive(store, path, contents, options);
    // From here the blob is the storage's: it discards it when the write certainly did not happen,
    // and never once a resource may refer to it (an acknowledged write is never undone).
    const { node, created } = await this.storage.putFile(
      store,
      path,
      blob,
      options.type,
      pre,
      this.now(),
      options.user,
    );
    return create(WriteResponseSchema, { resource: toResource(node), created });
  }

  /**
   * Contents received into a blob and checked (announced length, MD5), ready for putFile, with the
   * write's conditions; refused (the blob discarded) otherwise. `received`: the contents are in
   * memory already (WriteMany), so nothing is checked before them.
   */
  private async receive(
    store: string,
    path: string,
    contents: AsyncIterable<Uint8Array>,
    options: ContentsOptions & { received?: boolean },
  ): Promise<{ blob: BlobInfo; pre: TagConditions }> {
    const pre = writeConditions(options.ifMatch, options.ifNoneMatch ?? []);
    // (Never above the largest resource accepted: that one is refused as too large, checked.)
    const unchecked = BigInt(Math.min(UNCHECKED_UPLOAD_MAX, this.maxResourceSize));
    const small =
      options.contentLength !== undefined && (options.received === true || options.contentLength <= unchecked);
    if (!small) await this.checkBeforeUpload(store, path, pre);
    // Unchecked, a body is received only up to its announced length: one that claims to be small
    // cannot make the server take in a large one bound to be refused.
    const maxSize = small ? Number(options.contentLength) : this.maxResourceSize;
    const blob = await this.storage.writeBlob(contents, { maxSize, store }).catch((err: unknown) => {
      if (small && err instanceof TooLargeError) {
        throw new BadRequestError(`received more than the ${options.contentLength} bytes announced`);
      }
      throw err;
    });
    let refusal: BadRequestError | undefined;
    if (options.contentLength !== undefined && BigInt(blob.size) !== options.contentLength) {
      refusal = new BadRequestError(`received ${blob.size} bytes, but ${options.contentLength} were announced`);
    } else if (options.contentMd5 && options.contentMd5 !== blob.md5) {
      const md5 = blob.md5;
      refusal = new BadRequestError({
        field: "content_md5",
        reason: (name) => `${name} mismatch: the contents have MD5 ${md5}`,
      });
    }
    if (refusal) {
      await this.storage.discardBlob(blob);
      throw refusal;
    }
    return { blob, pre };
  }

  /** MakeDirectory as the RPC faces call it: its tags parsed into the input every face gives `mkdir`. */
  makeDirectory(req: MakeDirectoryRequest, ctx: HandlerContext): Promise<MakeDirectoryResponse> {
    const { store, path, ifMatch, ifNoneMatch } = req;
    return this.mkdir({ store, path, ifMatch: tags(ifMatch), ifNoneMatch: tags(ifNoneMatch) }, ctx);
  }

  /** A directory made by a client, from any face: the preconditions parsed once, by the face (issue 32). */
  async mkdir(input: DirectoryInput, ctx: HandlerContext): Promise<MakeDirectoryResponse> {
    const { store, path } = this.target(input);
    const caller = ctx.values.get(callerKey);
    requireOperation(caller, "write", { store, path });
    const pre = writeConditions(input.ifMatch, input.ifNoneMatch);
    const made = this.storage.makeDirectory(store, path, pre, this.now(), caller.subject);
    const { node, created } = await made.catch((err) => {
      throw inFaceNames(err, ctx);
    });
    return create(MakeDirectoryResponseSchema, { resource: toResource(node), created });
  }

  /** Delete as the RPC faces call it: its If-Match parsed into the input every face gives `remove`. */
  delete(req: DeleteRequest, ctx: HandlerContext): Promise<DeleteResponse> {
    const { store, path, requireEmpty } = req;
    return this.remove({ store, path, ifMatch: tags(req.ifMatch), requireEmpty }, ctx);
  }

  /** A client's delete of a resource or a subtree, from any face: If-Match parsed once, by the face (issue 32). */
  async remove(input: DeleteInput, ctx: HandlerContext): Promise<DeleteResponse> {
    const { store, path } = this.target(input);
    const user = ctx.values.get(callerKey).subject;
    requireOperation(ctx.values.get(callerKey), "delete", { store, path });
    const { ifMatch } = input;
    const deleted = input.requireEmpty
      ? this.deleteIfEmpty(store, path, ifMatch, user)
      : this.storage.deleteTree(store, path, ifMatch.length > 0 ? { ifMatch } : {}, this.now(), user);
    const { node, count } = await deleted.catch((err) => {
      throw inFaceNames(err, ctx);
    });
    return create(DeleteResponseSchema, { resource: toResource(node), deletedCount: BigInt(count) });
  }

  /**
   * A delete with require_empty: a file as always, a directory only when nothing live is below it.
   * The directory's tag, read before its entries are counted, is the delete's If-Match: in a store
   * with sync-recursive a directory's tag changes with every change below it, so an entry added
   * between the count and the delete fails the delete instead of being deleted with it, and the
   * check runs again. A store without sync-recursive does not retag ancestors: there an entry
   * created in that window (one storage round trip) is deleted with the directory (docs/rest.md).
   */
  private async deleteIfEmpty(
    store: string,
    path: string,
    ifMatch: readonly string[],
    user: string,
  ): Promise<DeleteResult> {
    const asked = ifMatch.length > 0 ? { ifMatch } : {};
    for (let attempt = 1; ; attempt++) {
      const found = await this.storage.getStoreNode(store, path, { contents: false });
      const node = found?.node;
      // The root, not a live directory, or the caller's If-Match fails: deleteTree answers as it always does.
      if (
        path === "" ||
        !node ||
        node.deleted ||
        !node.directory ||
        (ifMatch.length > 0 && !tagMatches(ifMatch, node.tag))
      ) {
        return this.storage.deleteTree(store, path, asked, this.now(), user);
      }
      const below = await this.countBelow(store, path);
      if (below > 0) {
        const count =
          below >= NOT_EMPTY_COUNT_LIMIT ? `${below} or more entries` : `${below} ${below === 1 ? "entry" : "entries"}`;
        throw new NotEmptyError(`directory /${path} is not empty: ${count} below it`, below);
      }
      try {
        return await this.storage.deleteTree(store, path, { ifMatch: [node.tag] }, this.now(), user);
      } catch (err) {
        // Something changed below (or at) the directory since it was read: look again.
        if (err instanceof PreconditionFailedError && attempt < NOT_EMPTY_ATTEMPTS) continue;
        throw err;
      }
    }
  }

  /** Live entries below a directory, counted up to NOT_EMPTY_COUNT_LIMIT. */
  private async countBelow(store: string, path: string): Promise<number> {
    let count = 0;
    for await (const batch of this.storage.listNodes(store, path, { recursive: true, includeDeleted: false })) {
      count += batch.filter((n) => !n.deleted).length;
      if (count >= NOT_EMPTY_COUNT_LIMIT) return count;
    }
    return count;
  }

  async *list(req: ListRequest, ctx: HandlerContext): AsyncIterable<ListResponse> {
    const { store, path } = this.target(req);
    if (req.asOf !== "") {
      yield* this.history.listAsOf({ ...req, ifNoneMatch: tags(req.ifNoneMatch) }, store, path, ctx);
      return;
    }
    const caller = ctx.values.get(callerKey);
    requireOperation(caller, "read", { store, path });
    const { node, config } = await this.visible(store, path, false);
    requireOperation(caller, "read", node);
    if (!node.directory) throw new NotFoundError(`/${path} is not a directory`);
    const access = (n: NodeRecord) => (req.includeAccess ? accessOf(caller, n) : undefined);
    const directory = toResource(node, access(node));
    if (req.ifNoneMatch.length > 0 && tagMatches(tags(req.ifNoneMatch), node.tag)) {
      yield create(ListResponseSchema, { directory, notModified: true });
      return;
    }
    yield create(ListResponseSchema, { directory });
    const now = this.now();
    const options = { recursive: req.recursive, includeDeleted: req.includeDeleted };
    for await (const batch of this.storage.listNodes(store, path, options)) {
      throwIfCallAborted(ctx);
      const entries = batch
        .filter((n) => !isExpiredTombstone(n, config, now) && caller.may("read", n))
        .map((n) => toResource(n, access(n)));
      if (entries.length > 0) yield create(ListResponseSchema, { entries });
    }
  }

  /** The states of a resource, newest first (docs/history.md). */
  async *listVersions(req: ListVersionsRequest, ctx: HandlerContext): AsyncIterable<ListVersionsResponse> {
    const { store, path } = this.target(req);
    yield* this.history.listVersions(store, path, ctx);
  }

  /** A version of a resource made current again, or a subtree taken back to a moment (docs/history.md). */
  async restore(req: RestoreRequest, ctx: HandlerContext): Promise<RestoreResponse> {
    const { store, path } = this.target(req);
    return this.history.restore({ ...req, ifMatch: tags(req.ifMatch) }, store, path, ctx).catch((err) => {
      throw inFaceNames(err, ctx);
    });
  }

  private target(req: { store: string; path: string }): { store: string; path: string } {
    return { store: validateStoreName(req.store), path: parsePath(req.path) };
  }

  /**
   * The node at a path as a client may see it: expired tombstones are absent, live ones are
   * DeletedError. Without `contents`, `node.inline` may be null for small contents too.
   */
  private async visible(
    store: string,
    path: string,
    contents: boolean,
  ): Promise<{ node: NodeRecord; config: StoreConfig }> {
    return this.visibleIn(store, path, await this.storage.getStoreNode(store, path, { contents }));
  }

  /** What `visible` decides of a storage's answer (getStoreNode). */
  private visibleIn(
    store: string,
    path: string,
    found: StoreNode | undefined,
  ): { node: NodeRecord; config: StoreConfig } {
    if (!found) throw new NotFoundError(`store ${store} not found`);
    const { node, config } = found;
    if (!node || isExpiredTombstone(node, config, this.now())) {
      throw new NotFoundError(`/${path} not found in store ${store}`);
    }
    if (node.deleted) throw new DeletedError(`/${path} is deleted`, node.tag);
    return { node, config };
  }

  /**
   * Refuses an upload that is bound to fail before its body is received; the authoritative check
   * is repeated atomically when the resource is stored. One or two storage reads: worth it only
   * for a body larger than UNCHECKED_UPLOAD_MAX or of unknown length (storeContents).
   */
  private async checkBeforeUpload(store: string, path: string, pre: TagConditions): Promise<void> {
    const found = await this.storage.getStoreNode(store, path, { contents: false });
    if (!found) throw new NotFoundError(`store ${store} not found`);
    const now = this.now();
    const current = (node: NodeRecord | undefined) =>
      node && !isExpiredTombstone(node, found.config, now) ? node : undefined;
    const target = current(found.node);
    const parentPath = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
    // A live resource is in a live directory: read the parent only for a new resource.
    const parent =
      target && !target.deleted
        ? { path: parentPath, directory: true, deleted: false, tag: "" }
        : current((await this.storage.getStoreNode(store, parentPath, { contents: false }))?.node);
    planPutFile(path, target, parent, pre);
  }
}

/** The conditions of a write as the storage port takes them: a list given empty is no condition. */
function writeConditions(ifMatch: readonly string[], ifNoneMatch: readonly string[]): TagConditions {
  return {
    ...(ifMatch.length > 0 ? { ifMatch } : {}),
    ...(ifNoneMatch.length > 0 ? { ifNoneMatch } : {}),
  };
}

/** Whether a read answered its one message at once (ResourceCore.readNow). */
export function isMessage(answer: ReadResponse | AsyncIterable<ReadResponse>): answer is ReadResponse {
  return !(Symbol.asyncIterator in answer);
}

/** Entity tags as clients send them (quoted, unquoted, W/, "*", or comma-separated lists) in stored form. */
function tags(list: readonly string[]): string[] {
  return list.flatMap(parseTagList);
}

async function* chunksOf(iterator: AsyncIterator<WriteRequest>): AsyncIterable<Uint8Array> {
  for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
    if (next.value.part.case !== "chunk")
      throw new BadRequestError("only the first message of a write may be a header");
    yield next.value.part.value;
  }
}

/** Contents given whole, as the one chunk of a write. */
async function* only(contents: Uint8Array): AsyncIterable<Uint8Array> {
  yield contents;
}
