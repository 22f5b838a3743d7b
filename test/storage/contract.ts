// The contract every storage adapter keeps, checked only through StoragePort.
// Each adapter's test file calls storageContract with a factory of fresh, isolated instances.

import { createHash, randomBytes, randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  AlreadyExistsError,
  DeletedError,
  ForbiddenError,
  NotFoundError,
  PreconditionFailedError,
  TooLargeError,
} from "../../src/domain/errors.js";
import type { StoreConfig, StoreType } from "../../src/domain/store.js";
import {
  type BlobInfo,
  type EnvironmentRecord,
  type NodeRecord,
  type Preconditions,
  type ProjectRecord,
  type PromotionRecord,
  putEach,
  type ReportRecord,
  type StoragePort,
  type StoreRecord,
  type VersionRecord,
} from "../../src/storage/port.js";

export interface AdapterUnderTest {
  storage: StoragePort;
  /** Closes the adapter and removes everything it stored. */
  cleanup(): Promise<void>;
  /**
   * Every blob object the backend holds, partial uploads included. Optional: when
   * given, the suite also checks that failed and replaced writes leave nothing behind.
   */
  storedBlobs?(): Promise<string[]>;
}

export interface StorageCapabilities {
  /** Largest contents kept inline with the metadata, in bytes (default 64 KiB). */
  inlineLimit?: number;
}

const T0 = 1_700_000_000_000;
const SECOND = 1000;
const DAY = 86_400_000;
const MAX = 10 * 1024 * 1024;

function config(name: string, type: StoreType = "recursive", keepDeleted = "7d"): StoreConfig {
  return { name, type, settings: { "keep-deleted": keepDeleted } };
}

async function* chunked(data: Uint8Array, size = 7 * 1024): AsyncIterable<Uint8Array> {
  for (let i = 0; i < data.byteLength; i += size) yield data.subarray(i, Math.min(i + size, data.byteLength));
}

function text(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

function md5(data: Uint8Array): string {
  return createHash("md5").update(data).digest("base64");
}

async function readAll(storage: StoragePort, node: NodeRecord): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of storage.readBlob(node)) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
}

async function listAll(
  storage: StoragePort,
  store: string,
  dir: string,
  options: { recursive: boolean; includeDeleted?: boolean },
): Promise<NodeRecord[]> {
  const out: NodeRecord[] = [];
  for await (const batch of storage.listNodes(store, dir, { includeDeleted: false, ...options })) out.push(...batch);
  return out;
}

/** Unicode code point order, which is UTF-8 byte order: the order paths are listed in. */
function byCodePoint(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** A file node standing for a blob not (or no longer) referenced, to try reading it. */
function nodeOf(blob: BlobInfo, store = "s", path = "x"): NodeRecord {
  return {
    store,
    path,
    directory: false,
    deleted: false,
    tag: "t",
    prevTag: "",
    type: "application/octet-stream",
    size: blob.size,
    md5: blob.md5,
    blob: blob.blob,
    created: T0,
    modified: T0,
    eventId: 1,
    inline: blob.inline,
  };
}

function projectRecord(account: string, name: string, created = T0): ProjectRecord {
  return { id: randomUUID(), account, name, store: `${account}-${name}`, created, creator: "ann" };
}

function environmentRecord(projectId: string, name: string, created = T0): EnvironmentRecord {
  return { id: randomUUID(), projectId, name, created, creator: "ann" };
}

/** A report as the service creates it: generating, held by no one, claimable at once. */
function reportRecord(fields: Partial<ReportRecord> = {}): ReportRecord {
  return {
    id: randomUUID(),
    projectId: randomUUID(),
    environmentId: randomUUID(),
    creator: "ann",
    created: T0,
    additionalFields: [],
    status: "generating",
    finished: 0,
    expiresAt: T0 + 90 * DAY,
    reason: "",
    attempts: 0,
    leaseOwner: "",
    leaseExpires: 0,
    document: null,
    ...fields,
  };
}

async function readDocument(storage: StoragePort, report: ReportRecord): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of storage.insights.readReportDocument(report)) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
}

async function promotionsOf(storage: StoragePort, environmentId: string): Promise<PromotionRecord[]> {
  const out: PromotionRecord[] = [];
  for await (const p of storage.insights.listPromotions(environmentId)) out.push(p);
  return out.sort((a, b) => byCodePoint(a.path, b.path));
}

export function storageContract(
  name: string,
  createAdapter: () => Promise<AdapterUnderTest>,
  capabilities: StorageCapabilities = {},
): void {
  const inlineLimit = capabilities.inlineLimit ?? 64 * 1024;

  describe(`storage contract: ${name}`, () => {
    let adapter: AdapterUnderTest;
    let storage: StoragePort;

    beforeEach(async () => {
      adapter = await createAdapter();
      storage = adapter.storage;
    });

    afterEach(async () => {
      await adapter.cleanup();
    });

    async function put(
      store: string,
      path: string,
      contents: string | Uint8Array,
      options: { pre?: Preconditions; now?: number; type?: string; user?: string } = {},
    ) {
      const data = typeof contents === "string" ? text(contents) : contents;
      // As the resource service writes: told the store, as a filesystem store needs to be.
      const blob = await storage.writeBlob(chunked(data), { maxSize: MAX, store });
      try {
        return await storage.putFile(
          store,
          path,
          blob,
          options.type ?? "text/plain",
          options.pre ?? {},
          options.now ?? T0,
          options.user,
        );
      } catch (err) {
        await storage.discardBlob(blob);
        throw err;
      }
    }

    async function mkdir(store: string, path: string, now = T0) {
      return storage.makeDirectory(store, path, {}, now);
    }

    async function node(store: string, path: string): Promise<NodeRecord> {
      const n = await storage.getNode(store, path);
      if (!n) throw new Error(`expected a node at ${store}:/${path}`);
      return n;
    }

    async function store(name: string): Promise<StoreRecord> {
      const s = await storage.getStore(name);
      if (!s) throw new Error(`expected a store ${name}`);
      return s;
    }

    async function blobsNow(): Promise<string[] | undefined> {
      return (await adapter.storedBlobs?.())?.sort();
    }

    describe("stores", () => {
      it("createStore returns the live store with its configuration and a root tag", async () => {
        const created = await storage.createStore(config("s", "snapshot", "1d"), T0);
        expect(created).toMatchObject({
          config: { name: "s", type: "snapshot", settings: { "keep-deleted": "1d" } },
          deleted: false,
          purgedEventId: 0,
          created: T0,
          modified: T0,
        });
        expect(created.lastEventId).toBeGreaterThan(0);
        expect(created.rootTag).not.toBe("");
        expect(await storage.getStore("s")).toEqual(created);
      });

      it("createStore of a name already taken throws AlreadyExistsError and changes nothing", async () => {
        const first = await storage.createStore(config("s"), T0);
        await expect(storage.createStore(config("s", "snapshot", "1s"), T0 + SECOND)).rejects.toBeInstanceOf(
          AlreadyExistsError,
        );
        expect(await storage.getStore("s")).toEqual(first);
      });

      it("getStore of an unknown store is undefined", async () => {
        expect(await storage.getStore("nope")).toBeUndefined();
      });

      it("listStores lists the live stores and leaves deleted ones out", async () => {
        await storage.createStore(config("b"), T0);
        await storage.createStore(config("a"), T0);
        await storage.createStore(config("c"), T0);
        await storage.deleteStore("b", T0 + SECOND);
        const names = (await storage.listStores()).map((s) => s.config.name).sort();
        expect(names).toEqual(["a", "c"]);
        for (const s of await storage.listStores()) expect(s.deleted).toBe(false);
      });

      it("updateStore changes type and settings, keeps created and sets modified", async () => {
        await storage.createStore(config("s"), T0);
        const updated = await storage.updateStore(config("s", "snapshot", "2h"), T0 + SECOND);
        expect(updated).toMatchObject({
          config: { name: "s", type: "snapshot", settings: { "keep-deleted": "2h" } },
          deleted: false,
          created: T0,
          modified: T0 + SECOND,
        });
        expect(await storage.getStore("s")).toEqual(updated);
      });

      it("updateStore of an unknown or deleted store throws NotFoundError", async () => {
        await expect(storage.updateStore(config("nope"), T0)).rejects.toBeInstanceOf(NotFoundError);
        await storage.createStore(config("s"), T0);
        await storage.deleteStore("s", T0 + SECOND);
        await expect(storage.updateStore(config("s"), T0 + 2 * SECOND)).rejects.toBeInstanceOf(NotFoundError);
        expect((await store("s")).deleted).toBe(true);
      });

      it("deleteStore keeps a tombstone with deleted=true and removes the store's resources", async () => {
        await storage.createStore(config("s"), T0);
        await mkdir("s", "d");
        const big = await put("s", "d/big.bin", randomBytes(inlineLimit + 1));
        const deleted = await storage.deleteStore("s", T0 + SECOND);
        expect(deleted).toMatchObject({ config: { name: "s" }, deleted: true, modified: T0 + SECOND });
        expect(await storage.getStore("s")).toEqual(deleted);
        expect(await storage.getNode("s", "d/big.bin")).toBeUndefined();
        expect(await storage.getNode("s", "")).toBeUndefined();
        await expect(readAll(storage, big.node)).rejects.toBeInstanceOf(NotFoundError);
      });

      it("deleteStore of an unknown or already deleted store throws NotFoundError", async () => {
        await expect(storage.deleteStore("nope", T0)).rejects.toBeInstanceOf(NotFoundError);
        await storage.createStore(config("s"), T0);
        await storage.deleteStore("s", T0 + SECOND);
        await expect(storage.deleteStore("s", T0 + 2 * SECOND)).rejects.toBeInstanceOf(NotFoundError);
      });

      it("re-creating a deleted store continues its event ids and makes every older cursor stale", async () => {
        await storage.createStore(config("s"), T0);
        await put("s", "a.txt", "one");
        const before = await store("s");
        await storage.deleteStore("s", T0 + SECOND);
        const revived = await storage.createStore(config("s", "snapshot"), T0 + 2 * SECOND);
        expect(revived).toMatchObject({ deleted: false, created: T0 + 2 * SECOND, config: { type: "snapshot" } });
        expect(await storage.getNode("s", "a.txt")).toBeUndefined();
        // A cursor c is usable only while c >= purgedEventId: a client that saw every event of the
        // old store (c = before.lastEventId) missed the deletion and must be told to start again.
        expect(revived.purgedEventId).toBeGreaterThan(before.lastEventId);
        expect(revived.lastEventId).toBeGreaterThanOrEqual(revived.purgedEventId);
        const root = await node("s", "");
        expect(root.eventId).toBeGreaterThan(before.lastEventId);
        expect(root.eventId).toBeLessThanOrEqual(revived.lastEventId);
        const { node: file } = await put("s", "b.txt", "two", { now: T0 + 3 * SECOND });
        expect(file.eventId).toBeGreaterThan(revived.lastEventId);
      });

      it("the root directory exists once the store is created and carries the store's root tag", async () => {
        const created = await storage.createStore(config("s"), T0);
        const root = await node("s", "");
        expect(root).toMatchObject({
          store: "s",
          path: "",
          directory: true,
          deleted: false,
          tag: created.rootTag,
          prevTag: "",
          created: T0,
          modified: T0,
        });
        expect(root.eventId).toBeGreaterThan(0);
        expect(root.eventId).toBeLessThanOrEqual(created.lastEventId);
        expect(await listAll(storage, "s", "", { recursive: true, includeDeleted: true })).toEqual([]);
      });

      it("writes to an unknown or deleted store throw NotFoundError", async () => {
        const blob = await storage.writeBlob(chunked(text("x")), { maxSize: MAX, store: "nope" });
        await expect(storage.putFile("nope", "a.txt", blob, "text/plain", {}, T0)).rejects.toBeInstanceOf(
          NotFoundError,
        );
        await expect(storage.makeDirectory("nope", "d", {}, T0)).rejects.toBeInstanceOf(NotFoundError);
        await expect(storage.deleteTree("nope", "d", {}, T0)).rejects.toBeInstanceOf(NotFoundError);
        await storage.createStore(config("s"), T0);
        await storage.deleteStore("s", T0);
        await expect(storage.putFile("s", "a.txt", blob, "text/plain", {}, T0)).rejects.toBeInstanceOf(NotFoundError);
        await expect(storage.makeDirectory("s", "d", {}, T0)).rejects.toBeInstanceOf(NotFoundError);
      });
    });

    describe("makeDirectory", () => {
      beforeEach(async () => {
        await storage.createStore(config("s", "snapshot"), T0);
      });

      it("creates a directory, and a second call reports created=false and changes nothing", async () => {
        const first = await storage.makeDirectory("s", "d", {}, T0 + SECOND);
        expect(first.created).toBe(true);
        expect(first.node).toMatchObject({
          store: "s",
          path: "d",
          directory: true,
          deleted: false,
          prevTag: "",
          md5: "",
          blob: "",
          created: T0 + SECOND,
          modified: T0 + SECOND,
        });
        expect(first.node.tag).not.toBe("");
        const last = (await store("s")).lastEventId;
        const again = await storage.makeDirectory("s", "d", {}, T0 + 2 * SECOND);
        expect(again.created).toBe(false);
        expect(again.node).toEqual(first.node);
        expect((await store("s")).lastEventId).toBe(last);
      });

      it("creates a nested directory below an existing one", async () => {
        await mkdir("s", "a");
        const { created, node: d } = await mkdir("s", "a/b");
        expect(created).toBe(true);
        expect(d.path).toBe("a/b");
      });

      it("throws NotFoundError when the parent directory is missing, deleted or a file", async () => {
        await expect(mkdir("s", "missing/d")).rejects.toBeInstanceOf(NotFoundError);
        await mkdir("s", "gone");
        await storage.deleteTree("s", "gone", {}, T0);
        await expect(mkdir("s", "gone/d")).rejects.toBeInstanceOf(NotFoundError);
        await put("s", "f.txt", "x");
        await expect(mkdir("s", "f.txt/d")).rejects.toBeInstanceOf(NotFoundError);
        expect(await storage.getNode("s", "missing/d")).toBeUndefined();
        expect(await storage.getNode("s", "f.txt/d")).toBeUndefined();
      });

      it("throws ForbiddenError when a file has the name, and leaves the file alone", async () => {
        const { node: file } = await put("s", "taken", "x");
        await expect(mkdir("s", "taken")).rejects.toBeInstanceOf(ForbiddenError);
        expect(await node("s", "taken")).toEqual(file);
      });

      it("replaces the tombstone of a file with a new directory", async () => {
        const { node: file } = await put("s", "x", "contents");
        await storage.deleteTree("s", "x", {}, T0 + SECOND);
        const { created, node: dir } = await mkdir("s", "x", T0 + 2 * SECOND);
        expect(created).toBe(true);
        expect(dir).toMatchObject({ directory: true, deleted: false, created: T0 + 2 * SECOND, prevTag: "" });
        expect(dir.eventId).toBeGreaterThan(file.eventId);
      });

      it("honours If-Match: an absent directory fails, a matching tag passes", async () => {
        await expect(storage.makeDirectory("s", "d", { ifMatch: ["*"] }, T0)).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        expect(await storage.getNode("s", "d")).toBeUndefined();
        const { node: d } = await mkdir("s", "d");
        await expect(storage.makeDirectory("s", "d", { ifMatch: ["other"] }, T0)).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        expect((await storage.makeDirectory("s", "d", { ifMatch: [d.tag] }, T0)).created).toBe(false);
      });
    });

    describe("putFile", () => {
      beforeEach(async () => {
        await storage.createStore(config("s", "snapshot"), T0);
      });

      it("creates a file with the blob's size, MD5 and blob id, and no previous tag", async () => {
        const blob = await storage.writeBlob(chunked(text("hello")), { maxSize: MAX, store: "s" });
        const { created, node: file } = await storage.putFile("s", "a.txt", blob, "text/plain", {}, T0 + SECOND);
        expect(created).toBe(true);
        expect(file).toMatchObject({
          store: "s",
          path: "a.txt",
          directory: false,
          deleted: false,
          prevTag: "",
          type: "text/plain",
          size: 5,
          md5: md5(text("hello")),
          blob: blob.blob,
          created: T0 + SECOND,
          modified: T0 + SECOND,
        });
        expect(file.tag).not.toBe("");
        expect(await storage.getNode("s", "a.txt")).toEqual(file);
        expect((await readAll(storage, file)).toString()).toBe("hello");
      });

      it("replaces a file: created=false, a new tag, prevTag is the old tag, created time kept", async () => {
        const { node: first } = await put("s", "a.txt", "one", { now: T0 + SECOND });
        const { created, node: second } = await put("s", "a.txt", "two!", {
          now: T0 + 2 * SECOND,
          type: "application/json",
        });
        expect(created).toBe(false);
        expect(second.tag).not.toBe(first.tag);
        expect(second).toMatchObject({
          prevTag: first.tag,
          created: T0 + SECOND,
          modified: T0 + 2 * SECOND,
          size: 4,
          md5: md5(text("two!")),
          type: "application/json",
        });
        expect(second.eventId).toBeGreaterThan(first.eventId);
        expect((await readAll(storage, await node("s", "a.txt"))).toString()).toBe("two!");
      });

      it("If-Match with a stale tag throws PreconditionFailedError and changes nothing", async () => {
        const { node: first } = await put("s", "a.txt", "one");
        const last = (await store("s")).lastEventId;
        await expect(put("s", "a.txt", "two", { pre: { ifMatch: ["stale"] } })).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        expect(await node("s", "a.txt")).toEqual(first);
        expect((await store("s")).lastEventId).toBe(last);
      });

      it("If-Match on an absent or deleted resource throws PreconditionFailedError", async () => {
        await expect(put("s", "a.txt", "x", { pre: { ifMatch: ["*"] } })).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        await expect(put("s", "a.txt", "x", { pre: { ifMatch: ["some-tag"] } })).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        expect(await storage.getNode("s", "a.txt")).toBeUndefined();
        const { node: file } = await put("s", "b.txt", "x");
        await storage.deleteTree("s", "b.txt", {}, T0);
        const tombstone = await node("s", "b.txt");
        await expect(put("s", "b.txt", "y", { pre: { ifMatch: [tombstone.tag, file.tag] } })).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        await expect(put("s", "b.txt", "y", { pre: { ifMatch: ["*"] } })).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        expect(await node("s", "b.txt")).toEqual(tombstone);
      });

      it("If-Match with the current tag, one of several tags, or * replaces the file", async () => {
        const { node: v1 } = await put("s", "a.txt", "1");
        const { node: v2 } = await put("s", "a.txt", "2", { pre: { ifMatch: [v1.tag] } });
        const { node: v3 } = await put("s", "a.txt", "3", { pre: { ifMatch: ["other", v2.tag] } });
        const { created, node: v4 } = await put("s", "a.txt", "4", { pre: { ifMatch: ["*"] } });
        expect(created).toBe(false);
        expect(v4.prevTag).toBe(v3.tag);
        expect((await readAll(storage, await node("s", "a.txt"))).toString()).toBe("4");
      });

      it("If-None-Match * (issue 30, conditional create) creates where nothing lives, a tombstone included", async () => {
        const { created, node: made } = await put("s", "a.txt", "new", { pre: { ifNoneMatch: ["*"] } });
        expect(created).toBe(true);
        expect(await node("s", "a.txt")).toEqual(made);
        await put("s", "b.txt", "x");
        await storage.deleteTree("s", "b.txt", {}, T0);
        const again = await put("s", "b.txt", "again", { pre: { ifNoneMatch: ["*"] } });
        expect(again.created).toBe(true);
        expect((await readAll(storage, await node("s", "b.txt"))).toString()).toBe("again");
      });

      it("If-None-Match * on a live file or directory throws PreconditionFailedError and changes nothing", async () => {
        const { node: first } = await put("s", "a.txt", "one");
        await mkdir("s", "d");
        const dir = await node("s", "d");
        const last = (await store("s")).lastEventId;
        await expect(put("s", "a.txt", "two", { pre: { ifNoneMatch: ["*"] } })).rejects.toThrow(
          `if_none_match * given but /a.txt exists (current ETag "${first.tag}")`,
        );
        await expect(put("s", "d", "two", { pre: { ifNoneMatch: ["*"] } })).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        await expect(storage.makeDirectory("s", "d", { ifNoneMatch: ["*"] }, T0)).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        expect(await node("s", "a.txt")).toEqual(first);
        expect(await node("s", "d")).toEqual(dir);
        expect((await store("s")).lastEventId).toBe(last);
        expect((await readAll(storage, await node("s", "a.txt"))).toString()).toBe("one");
      });

      it("replaces the tombstone of a file as a new resource", async () => {
        const { node: first } = await put("s", "a.txt", "one", { now: T0 });
        await storage.deleteTree("s", "a.txt", {}, T0 + SECOND);
        const { created, node: again } = await put("s", "a.txt", "two", { now: T0 + 2 * SECOND });
        expect(created).toBe(true);
        expect(again).toMatchObject({ deleted: false, prevTag: "", created: T0 + 2 * SECOND });
        expect(again.tag).not.toBe(first.tag);
      });

      it("throws NotFoundError when the parent directory is missing, deleted or a file", async () => {
        await expect(put("s", "missing/a.txt", "x")).rejects.toBeInstanceOf(NotFoundError);
        await mkdir("s", "gone");
        await storage.deleteTree("s", "gone", {}, T0);
        await expect(put("s", "gone/a.txt", "x")).rejects.toBeInstanceOf(NotFoundError);
        await put("s", "f", "x");
        await expect(put("s", "f/a.txt", "x")).rejects.toBeInstanceOf(NotFoundError);
        expect(await storage.getNode("s", "missing/a.txt")).toBeUndefined();
      });

      it("throws ForbiddenError for the name of an existing directory or the root", async () => {
        const { node: dir } = await mkdir("s", "d");
        await expect(put("s", "d", "x")).rejects.toBeInstanceOf(ForbiddenError);
        await expect(put("s", "", "x")).rejects.toBeInstanceOf(ForbiddenError);
        expect(await node("s", "d")).toEqual(dir);
        expect((await node("s", "")).directory).toBe(true);
      });

      it("puts files in nested directories with any Unicode names", async () => {
        await mkdir("s", "été");
        const { node: file } = await put("s", "été/日本語 \u{1F600}.txt", "x");
        expect(file.path).toBe("été/日本語 \u{1F600}.txt");
        expect(await node("s", "été/日本語 \u{1F600}.txt")).toEqual(file);
      });

      it("concurrent writes to different paths all succeed with distinct event ids", async () => {
        const results = await Promise.all(Array.from({ length: 20 }, (_, i) => put("s", `f${i}.txt`, `${i}`)));
        const ids = results.map((r) => r.node.eventId);
        expect(new Set(ids).size).toBe(20);
        expect((await store("s")).lastEventId).toBe(Math.max(...ids));
        expect(await listAll(storage, "s", "", { recursive: false })).toHaveLength(20);
      });
    });

    describe("putFiles (WriteMany's files; putEach where the adapter has none)", () => {
      beforeEach(async () => {
        await storage.createStore(config("s", "snapshot"), T0);
      });
      const putFiles = (files: { path: string; blob: BlobInfo; type: string; pre: Preconditions }[], now = T0) =>
        storage.putFiles ? storage.putFiles("s", files, now) : putEach(storage, "s", files, now);
      const received = (contents: Uint8Array) => storage.writeBlob(chunked(contents), { maxSize: MAX, store: "s" });

      it("writes each file in order with its own outcome: a refused one changes nothing, the others are written", async () => {
        const { node: kept } = await put("s", "kept.txt", "kept");
        const last = (await store("s")).lastEventId;
        const large = randomBytes(inlineLimit + 1);
        const before = await blobsNow();
        const answers = await putFiles([
          { path: "a.txt", blob: await received(text("one")), type: "text/plain", pre: {} },
          { path: "kept.txt", blob: await received(large), type: "text/plain", pre: { ifMatch: ["stale"] } },
          { path: "no/parent.txt", blob: await received(text("x")), type: "text/plain", pre: {} },
          { path: "a.txt", blob: await received(text("two")), type: "text/plain", pre: {} },
        ]);
        expect(answers.map((a) => ("error" in a ? a.error?.constructor.name : a.result.created))).toEqual([
          true,
          "PreconditionFailedError",
          "NotFoundError",
          false,
        ]);
        const written = answers[3] as { result: { node: NodeRecord } };
        expect((await readAll(storage, await node("s", "a.txt"))).toString()).toBe("two");
        expect(written.result.node.prevTag).toBe((answers[0] as { result: { node: NodeRecord } }).result.node.tag);
        expect(await node("s", "kept.txt")).toEqual(kept);
        expect(await storage.getNode("s", "no/parent.txt")).toBeUndefined();
        // Each written file has its own event, in order.
        const first = (answers[0] as { result: { node: NodeRecord } }).result.node;
        expect(first.eventId).toBeGreaterThan(last);
        expect(written.result.node.eventId).toBeGreaterThan(first.eventId);
        // The refused large blob is discarded, as putFile's would be.
        expect(await blobsNow()).toEqual(before);
      });
    });

    describe("blobs", () => {
      beforeEach(async () => {
        await storage.createStore(config("s", "snapshot"), T0);
      });

      it("writeBlob computes size and base64 MD5 over all chunks and keeps small contents inline", async () => {
        const data = randomBytes(10_000);
        const blob = await storage.writeBlob(chunked(data, 999), { maxSize: MAX });
        expect(blob.size).toBe(10_000);
        expect(blob.md5).toBe(md5(data));
        expect(blob.blob).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
        expect(blob.inline && Buffer.from(blob.inline).equals(data)).toBe(true);
        const { node: file } = await storage.putFile("s", "small.bin", blob, "application/octet-stream", {}, T0);
        expect(file.inline && Buffer.from(file.inline).equals(data)).toBe(true);
        expect((await readAll(storage, file)).equals(data)).toBe(true);
      });

      it("writeBlob of empty contents gives size 0, the MD5 of nothing, and reads back empty", async () => {
        const blob = await storage.writeBlob(chunked(new Uint8Array(0)), { maxSize: MAX, store: "s" });
        expect(blob).toMatchObject({ size: 0, md5: "1B2M2Y8AsgTpgAmY7PhCfg==" });
        const { node: file } = await storage.putFile("s", "empty", blob, "text/plain", {}, T0);
        expect(file.size).toBe(0);
        expect((await readAll(storage, await node("s", "empty"))).byteLength).toBe(0);
      });

      it(`contents up to ${inlineLimit} bytes are inline, larger ones are not`, async () => {
        const atLimit = await storage.writeBlob(chunked(randomBytes(inlineLimit)), { maxSize: MAX });
        expect(atLimit.inline?.byteLength).toBe(inlineLimit);
        const above = await storage.writeBlob(chunked(randomBytes(inlineLimit + 1)), { maxSize: MAX });
        expect(above.inline).toBeNull();
        expect(above.size).toBe(inlineLimit + 1);
        await storage.discardBlob(atLimit);
        await storage.discardBlob(above);
      });

      it("large contents stream to storage and read back byte for byte", async () => {
        const data = randomBytes(3 * inlineLimit + 12_345);
        const blob = await storage.writeBlob(chunked(data, 5000), { maxSize: MAX, store: "s" });
        expect(blob).toMatchObject({ size: data.byteLength, md5: md5(data), inline: null });
        const { node: file } = await storage.putFile("s", "big.bin", blob, "application/octet-stream", {}, T0);
        expect(file).toMatchObject({ size: data.byteLength, md5: md5(data), blob: blob.blob });
        expect(file.inline).toBeNull();
        const stored = await node("s", "big.bin");
        expect(stored.inline).toBeNull();
        expect((await readAll(storage, stored)).equals(data)).toBe(true);
        if (adapter.storedBlobs) expect(await adapter.storedBlobs()).toContain(blob.blob);
      });

      it("writeBlob accepts contents of exactly maxSize", async () => {
        const blob = await storage.writeBlob(chunked(randomBytes(100)), { maxSize: 100 });
        expect(blob.size).toBe(100);
      });

      it("contents larger than maxSize throw TooLargeError and leave nothing behind", async () => {
        const before = await blobsNow();
        await expect(storage.writeBlob(chunked(randomBytes(101)), { maxSize: 100 })).rejects.toBeInstanceOf(
          TooLargeError,
        );
        const big = inlineLimit * 3;
        await expect(storage.writeBlob(chunked(randomBytes(big + 1)), { maxSize: big })).rejects.toBeInstanceOf(
          TooLargeError,
        );
        expect(await blobsNow()).toEqual(before);
      });

      it("a source that fails midway rejects writeBlob with its error and leaves nothing behind", async () => {
        const before = await blobsNow();
        async function* failing(): AsyncIterable<Uint8Array> {
          yield randomBytes(inlineLimit);
          yield randomBytes(inlineLimit);
          throw new Error("client went away");
        }
        await expect(storage.writeBlob(failing(), { maxSize: MAX })).rejects.toThrow("client went away");
        expect(await blobsNow()).toEqual(before);
      });

      it("discardBlob removes an unreferenced large blob and accepts an inline one", async () => {
        const before = await blobsNow();
        const large = await storage.writeBlob(chunked(randomBytes(inlineLimit * 2)), { maxSize: MAX });
        expect((await readAll(storage, nodeOf(large))).byteLength).toBe(inlineLimit * 2);
        await storage.discardBlob(large);
        await expect(readAll(storage, nodeOf(large))).rejects.toBeInstanceOf(NotFoundError);
        const small = await storage.writeBlob(chunked(text("small")), { maxSize: MAX });
        await storage.discardBlob(small);
        expect(await blobsNow()).toEqual(before);
      });

      it("replacing a file removes its old blob once the new one is referenced", async () => {
        const first = randomBytes(inlineLimit * 2);
        const second = randomBytes(inlineLimit * 2);
        const { node: v1 } = await put("s", "big.bin", first);
        const { node: v2 } = await put("s", "big.bin", second);
        expect(v2.blob).not.toBe(v1.blob);
        await expect(readAll(storage, v1)).rejects.toBeInstanceOf(NotFoundError);
        expect((await readAll(storage, await node("s", "big.bin"))).equals(second)).toBe(true);
        const blobs = await blobsNow();
        if (blobs) expect(blobs).toEqual([v2.blob]);
        // Large replaced by small: the large blob goes, the small contents are inline.
        const { node: v3 } = await put("s", "big.bin", "tiny");
        await expect(readAll(storage, v2)).rejects.toBeInstanceOf(NotFoundError);
        expect((await readAll(storage, v3)).toString()).toBe("tiny");
        if (blobs) expect(await blobsNow()).toEqual([]);
      });

      it("a replacement refused by its precondition leaves the old blob in place", async () => {
        const first = randomBytes(inlineLimit * 2);
        const { node: v1 } = await put("s", "big.bin", first);
        await expect(
          put("s", "big.bin", randomBytes(inlineLimit * 2), { pre: { ifMatch: ["stale"] } }),
        ).rejects.toBeInstanceOf(PreconditionFailedError);
        expect((await readAll(storage, v1)).equals(first)).toBe(true);
        const blobs = await blobsNow();
        if (blobs) expect(blobs).toEqual([v1.blob]);
      });
    });

    describe("getNode and listNodes", () => {
      beforeEach(async () => {
        await storage.createStore(config("s", "snapshot"), T0);
        await mkdir("s", "a");
        await mkdir("s", "a/b");
        await put("s", "a/b/y.txt", "y");
        await put("s", "a/x.txt", "x");
        await put("s", "a/gone.txt", "gone");
        await storage.deleteTree("s", "a/gone.txt", {}, T0);
        await put("s", "a.txt", "sibling");
        await put("s", "a-1", "sibling");
        await mkdir("s", "a0");
        await put("s", "a0/in.txt", "in");
        await put("s", "b.txt", "b");
      });

      it("getNode returns live nodes and tombstones, and undefined for unknown paths", async () => {
        expect(await node("s", "a/x.txt")).toMatchObject({ path: "a/x.txt", directory: false, deleted: false });
        expect(await node("s", "a/b")).toMatchObject({ path: "a/b", directory: true, deleted: false });
        expect(await node("s", "a/gone.txt")).toMatchObject({ path: "a/gone.txt", deleted: true });
        expect(await storage.getNode("s", "a/nope")).toBeUndefined();
        expect(await storage.getNode("other", "a/x.txt")).toBeUndefined();
      });

      it("lists the children of the root in path order, without the root itself", async () => {
        const paths = (await listAll(storage, "s", "", { recursive: false })).map((n) => n.path);
        expect(paths).toEqual(["a", "a-1", "a.txt", "a0", "b.txt"]);
      });

      it("lists only the direct children of a directory, without tombstones unless asked", async () => {
        const live = (await listAll(storage, "s", "a", { recursive: false })).map((n) => n.path);
        expect(live).toEqual(["a/b", "a/x.txt"]);
        const all = await listAll(storage, "s", "a", { recursive: false, includeDeleted: true });
        expect(all.map((n) => [n.path, n.deleted])).toEqual([
          ["a/b", false],
          ["a/gone.txt", true],
          ["a/x.txt", false],
        ]);
      });

      it("lists every descendant recursively in path order, and nothing from siblings named alike", async () => {
        const below = (await listAll(storage, "s", "a", { recursive: true })).map((n) => n.path);
        expect(below).toEqual(["a/b", "a/b/y.txt", "a/x.txt"]);
        const everything = (await listAll(storage, "s", "", { recursive: true, includeDeleted: true })).map(
          (n) => n.path,
        );
        expect(everything).toEqual([
          "a",
          "a-1",
          "a.txt",
          "a/b",
          "a/b/y.txt",
          "a/gone.txt",
          "a/x.txt",
          "a0",
          "a0/in.txt",
          "b.txt",
        ]);
      });

      it("a file named like a directory plus a suffix is not below that directory", async () => {
        for (const recursive of [true, false]) {
          const paths = (await listAll(storage, "s", "a", { recursive, includeDeleted: true })).map((n) => n.path);
          for (const p of paths) expect(p.startsWith("a/")).toBe(true);
        }
        await storage.deleteTree("s", "a", {}, T0 + SECOND);
        for (const sibling of ["a.txt", "a-1", "a0", "a0/in.txt"]) {
          expect((await node("s", sibling)).deleted).toBe(false);
        }
      });

      it("lists in Unicode code point order", async () => {
        const names = ["z", "\uFFFD", "\u{1F600}", "é", "日本", "\u{10FFFF}", "Z", "~"];
        await mkdir("s", "u");
        for (const n of names) await put("s", `u/${n}`, n);
        const expected = names.map((n) => `u/${n}`).sort(byCodePoint);
        for (const recursive of [false, true]) {
          const paths = (await listAll(storage, "s", "u", { recursive })).map((n) => n.path);
          expect(paths).toEqual(expected);
        }
        const top = await storage.createStore(config("t", "snapshot"), T0);
        expect(top.deleted).toBe(false);
        for (const n of names) await put("t", n, n);
        for (const recursive of [false, true]) {
          const paths = (await listAll(storage, "t", "", { recursive })).map((n) => n.path);
          expect(paths).toEqual([...names].sort(byCodePoint));
        }
      });

      it("returns batches of at most batchSize entries that together make the whole listing", async () => {
        await mkdir("s", "many");
        for (let i = 0; i < 7; i++) await put("s", `many/f${i}`, `${i}`);
        await storage.deleteTree("s", "many/f3", {}, T0);
        for (const recursive of [false, true]) {
          for (const includeDeleted of [false, true]) {
            const batches: NodeRecord[][] = [];
            for await (const batch of storage.listNodes("s", "many", { recursive, includeDeleted, batchSize: 2 })) {
              batches.push(batch);
            }
            for (const batch of batches) {
              expect(batch.length).toBeGreaterThan(0);
              expect(batch.length).toBeLessThanOrEqual(2);
            }
            const expected = [0, 1, 2, 3, 4, 5, 6].filter((i) => includeDeleted || i !== 3).map((i) => `many/f${i}`);
            expect(batches.flat().map((n) => n.path)).toEqual(expected);
          }
        }
      });

      it("lists nothing below a file or an unknown directory", async () => {
        expect(await listAll(storage, "s", "a.txt", { recursive: true, includeDeleted: true })).toEqual([]);
        expect(await listAll(storage, "s", "nope", { recursive: false, includeDeleted: true })).toEqual([]);
      });
    });

    describe("deleteTree", () => {
      beforeEach(async () => {
        await storage.createStore(config("s", "snapshot"), T0);
      });

      it("deletes a file, leaving a tombstone with a new tag and event", async () => {
        const { node: file } = await put("s", "a.txt", "x");
        const { node: tombstone, count } = await storage.deleteTree("s", "a.txt", {}, T0 + SECOND);
        expect(count).toBe(1);
        expect(tombstone).toMatchObject({
          store: "s",
          path: "a.txt",
          directory: false,
          deleted: true,
          prevTag: file.tag,
          modified: T0 + SECOND,
          blob: "",
        });
        expect(tombstone.tag).not.toBe(file.tag);
        expect(tombstone.eventId).toBeGreaterThan(file.eventId);
        expect(await storage.getNode("s", "a.txt")).toEqual(tombstone);
        expect(await listAll(storage, "s", "", { recursive: false })).toEqual([]);
      });

      it("deletes a directory with everything below it, removing the blobs", async () => {
        const big = randomBytes(inlineLimit * 2);
        await mkdir("s", "d");
        await mkdir("s", "d/e");
        const { node: large } = await put("s", "d/e/big.bin", big);
        await put("s", "d/e/small.txt", "small");
        await put("s", "d/f.txt", "f");
        await put("s", "d/old.txt", "old");
        const { node: old } = await storage.deleteTree("s", "d/old.txt", {}, T0);
        await put("s", "d.txt", "sibling");
        const last = (await store("s")).lastEventId;

        const { node: dir, count } = await storage.deleteTree("s", "d", {}, T0 + SECOND);
        expect(count).toBe(5);
        expect(dir).toMatchObject({ path: "d", directory: true, deleted: true, modified: T0 + SECOND });
        const below = await listAll(storage, "s", "d", { recursive: true, includeDeleted: true });
        expect(below.map((n) => n.path)).toEqual(["d/e", "d/e/big.bin", "d/e/small.txt", "d/f.txt", "d/old.txt"]);
        for (const n of below) expect(n.deleted).toBe(true);
        for (const n of below.filter((n) => n.path !== "d/old.txt")) {
          expect(n.modified).toBe(T0 + SECOND);
          expect(n.eventId).toBeGreaterThan(last);
          // Entries below are deleted before the named directory (docs/storage.md).
          expect(n.eventId).toBeLessThan(dir.eventId);
        }
        expect(await node("s", "d/old.txt")).toEqual(old);
        expect(await listAll(storage, "s", "d", { recursive: true })).toEqual([]);
        await expect(readAll(storage, large)).rejects.toBeInstanceOf(NotFoundError);
        if (adapter.storedBlobs) expect(await adapter.storedBlobs()).toEqual([]);
        expect((await node("s", "d.txt")).deleted).toBe(false);
        expect(await listAll(storage, "s", "", { recursive: false })).toHaveLength(1);
      });

      it("If-Match with a stale tag throws PreconditionFailedError and deletes nothing", async () => {
        const { node: dir } = await mkdir("s", "d");
        await put("s", "d/f.txt", "f");
        await expect(storage.deleteTree("s", "d", { ifMatch: ["stale"] }, T0)).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        expect(await node("s", "d")).toEqual(dir);
        expect((await node("s", "d/f.txt")).deleted).toBe(false);
        const { count } = await storage.deleteTree("s", "d", { ifMatch: [dir.tag] }, T0);
        expect(count).toBe(2);
      });

      it("refuses to delete the root directory with ForbiddenError", async () => {
        await put("s", "a.txt", "x");
        await expect(storage.deleteTree("s", "", {}, T0)).rejects.toBeInstanceOf(ForbiddenError);
        expect((await node("s", "")).deleted).toBe(false);
        expect((await node("s", "a.txt")).deleted).toBe(false);
      });

      it("deleting a tombstone throws DeletedError carrying the tombstone's tag", async () => {
        await put("s", "a.txt", "x");
        const { node: tombstone } = await storage.deleteTree("s", "a.txt", {}, T0);
        const err = await storage.deleteTree("s", "a.txt", {}, T0 + SECOND).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(DeletedError);
        expect((err as DeletedError).tag).toBe(tombstone.tag);
        expect(await node("s", "a.txt")).toEqual(tombstone);
      });

      it("deleting an unknown path throws NotFoundError", async () => {
        await expect(storage.deleteTree("s", "nope", {}, T0)).rejects.toBeInstanceOf(NotFoundError);
        await expect(storage.deleteTree("s", "no/pe", {}, T0)).rejects.toBeInstanceOf(NotFoundError);
      });
    });

    describe("event ids", () => {
      it("increase strictly per store, one new id for every changed node", async () => {
        await storage.createStore(config("s", "snapshot"), T0);
        let last = (await store("s")).lastEventId;
        const seen = new Set<number>();
        const step = async (changed: NodeRecord[]) => {
          const now = (await store("s")).lastEventId;
          for (const n of changed) {
            expect(n.eventId).toBeGreaterThan(last);
            expect(n.eventId).toBeLessThanOrEqual(now);
            expect(seen.has(n.eventId)).toBe(false);
            seen.add(n.eventId);
          }
          last = now;
        };
        await step([(await mkdir("s", "d")).node]);
        await step([(await put("s", "d/a.txt", "1")).node]);
        await step([(await put("s", "d/a.txt", "2")).node]);
        await step([(await put("s", "d/b.txt", "3")).node]);
        await storage.deleteTree("s", "d", {}, T0);
        await step(await listAll(storage, "s", "", { recursive: true, includeDeleted: true }));
        await step([(await mkdir("s", "d")).node]);

        const ids = (await listAll(storage, "s", "", { recursive: true, includeDeleted: true })).map((n) => n.eventId);
        ids.push((await node("s", "")).eventId);
        expect(new Set(ids).size).toBe(ids.length);
      });

      it("are counted separately for each store", async () => {
        await storage.createStore(config("s"), T0);
        await storage.createStore(config("t"), T0);
        const t = (await store("t")).lastEventId;
        await put("s", "a.txt", "x");
        await put("s", "b.txt", "x");
        expect((await store("t")).lastEventId).toBe(t);
      });

      it("in a recursive store, every ancestor directory gets a new tag and event id", async () => {
        await storage.createStore(config("s", "recursive"), T0);
        await mkdir("s", "a");
        await mkdir("s", "a/b");
        await mkdir("s", "c");
        const before = {
          root: await node("s", ""),
          a: await node("s", "a"),
          b: await node("s", "a/b"),
          c: await node("s", "c"),
        };
        const last = (await store("s")).lastEventId;
        const { node: file } = await put("s", "a/b/f.txt", "x");
        const after = { root: await node("s", ""), a: await node("s", "a"), b: await node("s", "a/b") };
        for (const key of ["root", "a", "b"] as const) {
          expect(after[key].tag).not.toBe(before[key].tag);
          expect(after[key].prevTag).toBe(before[key].tag);
          expect(after[key].eventId).toBeGreaterThan(last);
        }
        const ids = [file.eventId, after.root.eventId, after.a.eventId, after.b.eventId];
        expect(new Set(ids).size).toBe(4);
        const s = await store("s");
        expect(s.lastEventId).toBe(Math.max(...ids));
        expect(s.rootTag).toBe(after.root.tag);
        expect(await node("s", "c")).toEqual(before.c);

        // Creating a directory and deleting a file retag the ancestors the same way.
        for (const change of [() => mkdir("s", "a/b/g"), () => storage.deleteTree("s", "a/b/f.txt", {}, T0)]) {
          const tags = [(await node("s", "")).tag, (await node("s", "a")).tag, (await node("s", "a/b")).tag];
          const previous = (await store("s")).lastEventId;
          await change();
          const now = [await node("s", ""), await node("s", "a"), await node("s", "a/b")];
          now.forEach((n, i) => {
            expect(n.tag).not.toBe(tags[i]);
            expect(n.eventId).toBeGreaterThan(previous);
          });
        }
      });

      it("in a snapshot store, ancestor directories keep their tags and event ids", async () => {
        await storage.createStore(config("s", "snapshot"), T0);
        await mkdir("s", "a");
        await mkdir("s", "a/b");
        const before = [await node("s", ""), await node("s", "a"), await node("s", "a/b")];
        const rootTag = (await store("s")).rootTag;
        const { node: file } = await put("s", "a/b/f.txt", "x");
        await mkdir("s", "a/b/g");
        await put("s", "a/b/f.txt", "y");
        await storage.deleteTree("s", "a/b/g", {}, T0);
        const after = [await node("s", ""), await node("s", "a"), await node("s", "a/b")];
        expect(after).toEqual(before);
        const s = await store("s");
        expect(s.rootTag).toBe(rootTag);
        expect(s.lastEventId).toBeGreaterThan(file.eventId);
      });
    });

    describe("concurrent writers", () => {
      beforeEach(async () => {
        await storage.createStore(config("s", "recursive"), T0);
      });

      it("of two writes with the same If-Match, exactly one wins", async () => {
        const { node: v1 } = await put("s", "a.txt", "v1");
        const outcomes = await Promise.allSettled([
          put("s", "a.txt", "left", { pre: { ifMatch: [v1.tag] } }),
          put("s", "a.txt", "right", { pre: { ifMatch: [v1.tag] } }),
        ]);
        const won = outcomes.filter((o) => o.status === "fulfilled");
        const lost = outcomes.filter((o) => o.status === "rejected");
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(1);
        expect((lost[0] as PromiseRejectedResult).reason).toBeInstanceOf(PreconditionFailedError);
        const winner = (won[0] as PromiseFulfilledResult<{ node: NodeRecord }>).value.node;
        expect(await node("s", "a.txt")).toEqual(winner);
        expect(winner.prevTag).toBe(v1.tag);
      });

      it("of concurrent creates with If-None-Match * (issue 30), exactly one wins; the others change nothing", async () => {
        const bodies = ["left", "right", "middle", "fourth"];
        const outcomes = await Promise.allSettled(
          bodies.map((b) => put("s", "a.txt", b, { pre: { ifNoneMatch: ["*"] } })),
        );
        const won = outcomes.filter((o) => o.status === "fulfilled");
        const lost = outcomes.filter((o) => o.status === "rejected");
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(bodies.length - 1);
        for (const l of lost) expect((l as PromiseRejectedResult).reason).toBeInstanceOf(PreconditionFailedError);
        const winner = won[0] as PromiseFulfilledResult<{ node: NodeRecord; created: boolean }>;
        expect(winner.value.created).toBe(true);
        expect(await node("s", "a.txt")).toEqual(winner.value.node);
        const stored = (await readAll(storage, await node("s", "a.txt"))).toString();
        expect(bodies[outcomes.indexOf(winner)]).toBe(stored);
      });

      it("of two creations of one directory, exactly one creates it", async () => {
        const results = await Promise.all([mkdir("s", "d"), mkdir("s", "d"), mkdir("s", "d")]);
        expect(results.filter((r) => r.created)).toHaveLength(1);
        for (const r of results) expect(r.node.tag).toBe((await node("s", "d")).tag);
      });

      it("a directory deleted while files are written into it has no live node below it", async () => {
        await mkdir("s", "d");
        await mkdir("s", "d/e");
        const writes = Array.from({ length: 12 }, (_, i) => put("s", `d/${i % 2 ? "e/" : ""}f${i}`, `${i}`));
        const deletion = storage.deleteTree("s", "d", {}, T0 + SECOND);
        const later = Array.from({ length: 12 }, (_, i) => put("s", `d/e/g${i}`, `${i}`));
        const outcomes = await Promise.allSettled([...writes, deletion, ...later]);
        for (const o of outcomes) {
          if (o.status === "rejected") expect(o.reason).toBeInstanceOf(NotFoundError);
        }
        expect(outcomes.at(12)?.status).toBe("fulfilled");
        expect((await node("s", "d")).deleted).toBe(true);
        const below = await listAll(storage, "s", "d", { recursive: true, includeDeleted: true });
        for (const n of below) expect([n.path, n.deleted]).toEqual([n.path, true]);
      });
    });

    describe("changesSince", () => {
      /** A node as changesSince reports it: the feed need not carry inline contents. */
      const withoutInline = ({ inline: _, ...rest }: NodeRecord) => rest;

      it("gives the latest state of every changed node, tombstones included, in event-id order", async () => {
        await storage.createStore(config("s", "recursive"), T0);
        await mkdir("s", "a");
        await put("s", "a/x.txt", "1");
        await put("s", "a/x.txt", "2");
        await put("s", "b.txt", "b");
        await storage.deleteTree("s", "b.txt", {}, T0 + SECOND);
        const changes = await storage.changesSince("s", 0, 1000);
        const ids = changes.map((n) => n.eventId);
        expect(ids).toEqual([...ids].sort((x, y) => x - y));
        expect(new Set(ids).size).toBe(ids.length);
        expect(changes.map((n) => n.path).sort()).toEqual(["", "a", "a/x.txt", "b.txt"]);
        for (const n of changes) expect(withoutInline(n)).toEqual(withoutInline(await node("s", n.path)));
        expect(changes.at(-1)?.eventId).toBe((await store("s")).lastEventId);
      });

      it("gives only the changes after the cursor, at most `limit` of them", async () => {
        await storage.createStore(config("s", "snapshot"), T0);
        await put("s", "a.txt", "a");
        const cursor = (await store("s")).lastEventId;
        expect(await storage.changesSince("s", cursor, 1000)).toEqual([]);
        const { node: b } = await put("s", "b.txt", "b");
        const { node: c } = await mkdir("s", "c");
        const { node: d } = await put("s", "d.txt", "d");
        const after = await storage.changesSince("s", cursor, 1000);
        expect(after.map((n) => [n.path, n.eventId])).toEqual([
          ["b.txt", b.eventId],
          ["c", c.eventId],
          ["d.txt", d.eventId],
        ]);
        expect((await storage.changesSince("s", cursor, 2)).map((n) => n.path)).toEqual(["b.txt", "c"]);
        expect((await storage.changesSince("s", b.eventId, 1)).map((n) => n.path)).toEqual(["c"]);
      });

      it("gives nothing for an unknown or deleted store, and drops purged tombstones", async () => {
        expect(await storage.changesSince("nope", 0, 10)).toEqual([]);
        await storage.createStore(config("s", "snapshot", "1s"), T0);
        await put("s", "a.txt", "a");
        await put("s", "b.txt", "b");
        await storage.deleteTree("s", "a.txt", {}, T0);
        await storage.purgeExpired(T0 + DAY);
        expect((await storage.changesSince("s", 0, 10)).map((n) => n.path)).toEqual(["", "b.txt"]);
        await storage.deleteStore("s", T0 + DAY);
        expect(await storage.changesSince("s", 0, 10)).toEqual([]);
      });

      it("a follower polling while writers run concurrently sees the final state of every node", async () => {
        await storage.createStore(config("s", "recursive"), T0);
        for (const d of ["p", "q", "r", "t"]) await mkdir("s", d);
        const seen = new Map<string, number>();
        let cursor = 0;
        let done = false;
        const follower = (async () => {
          for (;;) {
            const finished = done;
            const batch = await storage.changesSince("s", cursor, 7);
            for (const n of batch) {
              expect(n.eventId).toBeGreaterThan(cursor);
              cursor = n.eventId;
              seen.set(n.path, n.eventId);
            }
            if (batch.length === 0) {
              if (finished) return;
              await new Promise((resolve) => setImmediate(resolve));
            }
          }
        })();
        const writers = ["p", "q", "r", "t"].map(async (d) => {
          for (let i = 0; i < 12; i++) {
            await put("s", `${d}/f${i % 4}.txt`, `${i}`);
            if (i % 5 === 4) await storage.deleteTree("s", `${d}/f${i % 4}.txt`, {}, T0);
          }
        });
        await Promise.all(writers);
        done = true;
        await follower;
        const all = [
          await node("s", ""),
          ...(await listAll(storage, "s", "", { recursive: true, includeDeleted: true })),
        ];
        for (const n of all) expect([n.path, seen.get(n.path)]).toEqual([n.path, n.eventId]);
        expect(cursor).toBe((await store("s")).lastEventId);
      });
    });

    describe("onChange", () => {
      it("tells listeners the store's name after each change until they are removed", async () => {
        const heard: string[] = [];
        const remove = storage.onChange((s) => heard.push(s));
        await storage.createStore(config("s", "snapshot"), T0);
        expect(heard).toContain("s");
        for (const change of [
          () => mkdir("s", "d"),
          () => put("s", "d/a.txt", "a"),
          () => put("s", "d/a.txt", "b"),
          () => storage.deleteTree("s", "d", {}, T0),
          () => storage.deleteStore("s", T0),
        ]) {
          heard.length = 0;
          await change();
          expect(heard).toContain("s");
          expect(heard.every((s) => s === "s")).toBe(true);
        }
        remove();
        heard.length = 0;
        await storage.createStore(config("t", "snapshot"), T0);
        await put("t", "a.txt", "a");
        expect(heard).toEqual([]);
      });
    });

    describe("purgeExpired", () => {
      it("removes tombstones older than keep-deleted, raises purgedEventId, leaves live nodes alone", async () => {
        await storage.createStore(config("s", "snapshot", "1s"), T0);
        await mkdir("s", "d");
        await put("s", "d/a.txt", "a");
        await put("s", "d/b.txt", "b");
        await put("s", "keep.txt", "keep");
        await storage.deleteTree("s", "d", {}, T0 + SECOND);
        const tombstones = await listAll(storage, "s", "", { recursive: true, includeDeleted: true });
        const deletedIds = tombstones.filter((n) => n.deleted).map((n) => n.eventId);
        expect(deletedIds).toHaveLength(3);
        const live = await listAll(storage, "s", "", { recursive: true });
        const before = await store("s");

        expect(await storage.purgeExpired(T0 + SECOND + 500)).toBe(0);
        expect((await node("s", "d")).deleted).toBe(true);
        expect(await storage.purgeExpired(T0 + SECOND + 5 * SECOND)).toBe(3);

        expect(await storage.getNode("s", "d")).toBeUndefined();
        expect(await storage.getNode("s", "d/a.txt")).toBeUndefined();
        expect(await listAll(storage, "s", "", { recursive: true, includeDeleted: true })).toEqual(live);
        const after = await store("s");
        expect(after.purgedEventId).toBeGreaterThanOrEqual(Math.max(...deletedIds));
        expect(after.purgedEventId).toBeLessThanOrEqual(after.lastEventId);
        expect(after.lastEventId).toBe(before.lastEventId);
        expect(await storage.purgeExpired(T0 + DAY)).toBe(0);
      });

      it("uses each store's own keep-deleted", async () => {
        await storage.createStore(config("short", "snapshot", "1s"), T0);
        await storage.createStore(config("long", "snapshot", "7d"), T0);
        for (const s of ["short", "long"]) {
          await put(s, "a.txt", "a");
          await storage.deleteTree(s, "a.txt", {}, T0);
        }
        expect(await storage.purgeExpired(T0 + 10 * SECOND)).toBe(1);
        expect(await storage.getNode("short", "a.txt")).toBeUndefined();
        expect((await node("long", "a.txt")).deleted).toBe(true);
        expect((await store("long")).purgedEventId).toBe(0);
        expect(await storage.purgeExpired(T0 + 8 * DAY)).toBe(1);
        expect(await storage.getNode("long", "a.txt")).toBeUndefined();
      });

      it("purges expired tombstones of one store behind many older ones another store keeps", async () => {
        await storage.createStore(config("long", "snapshot", "7d"), T0);
        await storage.createStore(config("short", "snapshot", "1s"), T0);
        await mkdir("long", "d");
        for (let i = 0; i < 1100; i++) await put("long", `d/f${i}`, "x");
        await storage.deleteTree("long", "d", {}, T0);
        await put("short", "a.txt", "a");
        await storage.deleteTree("short", "a.txt", {}, T0 + SECOND);
        expect(await storage.purgeExpired(T0 + 10 * SECOND)).toBe(1);
        expect(await storage.getNode("short", "a.txt")).toBeUndefined();
        expect((await node("long", "d/f0")).deleted).toBe(true);
        // 1,100 writes: seconds on a networked backend.
      }, 600_000);

      it("a tombstone past keep-deleted counts as absent for writes before it is purged", async () => {
        await storage.createStore(config("s", "snapshot", "1s"), T0);
        await put("s", "a.txt", "a");
        await storage.deleteTree("s", "a.txt", {}, T0);
        await expect(storage.deleteTree("s", "a.txt", {}, T0 + 10)).rejects.toBeInstanceOf(DeletedError);
        await expect(storage.deleteTree("s", "a.txt", {}, T0 + 10 * SECOND)).rejects.toBeInstanceOf(NotFoundError);
        const { created } = await put("s", "a.txt", "again", { now: T0 + 10 * SECOND });
        expect(created).toBe(true);
      });
    });

    describe("getStoreNode", () => {
      beforeEach(async () => {
        await storage.createStore(config("s", "snapshot"), T0);
      });

      it("gives the live store's configuration and the node at the path, tombstones included", async () => {
        await mkdir("s", "d");
        const { node: file } = await put("s", "d/a.txt", "hello");
        await put("s", "gone.txt", "gone");
        const { node: tombstone } = await storage.deleteTree("s", "gone.txt", {}, T0 + SECOND);

        const found = await storage.getStoreNode("s", "d/a.txt", { contents: true });
        expect(found?.config).toEqual(config("s", "snapshot"));
        expect(found?.node).toEqual(file);
        expect(found?.node?.inline && Buffer.from(found.node.inline).toString()).toBe("hello");
        expect((await storage.getStoreNode("s", "d", { contents: true }))?.node).toEqual(await node("s", "d"));
        expect((await storage.getStoreNode("s", "", { contents: false }))?.node).toMatchObject({
          path: "",
          directory: true,
        });
        expect((await storage.getStoreNode("s", "gone.txt", { contents: true }))?.node).toEqual(tombstone);
      });

      it("gives the store with no node for a path where there is none", async () => {
        const found = await storage.getStoreNode("s", "nope/a.txt", { contents: true });
        expect(found).toEqual({ config: config("s", "snapshot"), node: undefined });
      });

      it("gives undefined for an unknown store and for a deleted one", async () => {
        await put("s", "a.txt", "a");
        expect(await storage.getStoreNode("nope", "a.txt", { contents: true })).toBeUndefined();
        await storage.deleteStore("s", T0 + SECOND);
        expect(await storage.getStoreNode("s", "a.txt", { contents: true })).toBeUndefined();
        expect(await storage.getStoreNode("s", "", { contents: false })).toBeUndefined();
      });

      it("without contents may leave inline null, and readBlob still gives the bytes, small or large", async () => {
        const small = randomBytes(1000);
        const large = randomBytes(inlineLimit * 2 + 5);
        await put("s", "small.bin", small);
        await put("s", "large.bin", large);
        for (const [path, data] of [
          ["small.bin", small],
          ["large.bin", large],
        ] as const) {
          const found = await storage.getStoreNode("s", path, { contents: false });
          const n = found?.node as NodeRecord;
          const { inline: _, ...metadata } = await node("s", path);
          expect(n).toMatchObject(metadata);
          if (n.inline !== null) expect(Buffer.from(n.inline).equals(data)).toBe(true);
          expect((await readAll(storage, n)).equals(data)).toBe(true);
        }
      });
    });

    describe("insights", () => {
      const LEASE = 30 * SECOND;

      /** A report document written the way the service writes it: one blob, then the job's final update. */
      async function finishWithDocument(report: ReportRecord, owner: string, data: Uint8Array, now: number) {
        const document = await storage.writeBlob(chunked(data), { maxSize: MAX });
        const finished = await storage.insights.updateReportJob(report.id, owner, {
          status: "generated",
          finished: now,
          expiresAt: now + 90 * DAY,
          leaseOwner: "",
          leaseExpires: 0,
          document,
        });
        expect(finished).toBe(true);
        return document;
      }

      async function report(id: string): Promise<ReportRecord> {
        const r = await storage.insights.getReport(id);
        if (!r) throw new Error(`expected a report ${id}`);
        return r;
      }

      describe("projects", () => {
        it("createProject stores the project; getProject gives it back, and undefined for an unknown id", async () => {
          const p = projectRecord("acme", "letters");
          expect(await storage.insights.createProject(p)).toEqual(p);
          expect(await storage.insights.getProject(p.id)).toEqual(p);
          expect(await storage.insights.getProject(randomUUID())).toBeUndefined();
        });

        it("listProjects lists every project by account, then by name", async () => {
          const projects = [
            projectRecord("zeta", "a"),
            projectRecord("acme", "policies"),
            projectRecord("acme", "Letters"),
            projectRecord("acme", "letters"),
            projectRecord("acme", "été"),
            projectRecord("beta", "letters"),
          ];
          for (const p of projects) await storage.insights.createProject(p);
          const listed = await storage.insights.listProjects();
          expect(listed.map((p) => `${p.account}/${p.name}`)).toEqual([
            "acme/Letters",
            "acme/letters",
            "acme/policies",
            "acme/été",
            "beta/letters",
            "zeta/a",
          ]);
          for (const p of listed) expect(p).toEqual(projects.find((q) => q.id === p.id));
        });

        it("a second project of the same name in one account throws AlreadyExistsError; other accounts may", async () => {
          const first = await storage.insights.createProject(projectRecord("acme", "letters"));
          await expect(
            storage.insights.createProject(projectRecord("acme", "letters", T0 + SECOND)),
          ).rejects.toBeInstanceOf(AlreadyExistsError);
          const other = await storage.insights.createProject(projectRecord("beta", "letters"));
          expect(await storage.insights.listProjects()).toEqual([first, other]);
        });

        it("of concurrent creations of one project name, exactly one succeeds", async () => {
          const outcomes = await Promise.allSettled(
            Array.from({ length: 6 }, () => storage.insights.createProject(projectRecord("acme", "letters"))),
          );
          expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
          for (const o of outcomes.filter((o) => o.status === "rejected")) {
            expect((o as PromiseRejectedResult).reason).toBeInstanceOf(AlreadyExistsError);
          }
          expect(await storage.insights.listProjects()).toHaveLength(1);
        });
      });

      describe("environments", () => {
        it("createEnvironment stores it; getEnvironment gives it back, and undefined for an unknown id", async () => {
          const e = environmentRecord(randomUUID(), "production");
          expect(await storage.insights.createEnvironment(e)).toEqual(e);
          expect(await storage.insights.getEnvironment(e.id)).toEqual(e);
          expect(await storage.insights.getEnvironment(randomUUID())).toBeUndefined();
        });

        it("listEnvironments lists one project's environments by name", async () => {
          const project = randomUUID();
          const other = randomUUID();
          const mine = ["test", "production", "development", "Staging"].map((n) => environmentRecord(project, n));
          for (const e of mine) await storage.insights.createEnvironment(e);
          await storage.insights.createEnvironment(environmentRecord(other, "acceptance"));
          const listed = await storage.insights.listEnvironments(project);
          expect(listed.map((e) => e.name)).toEqual(["Staging", "development", "production", "test"]);
          for (const e of listed) expect(e).toEqual(mine.find((m) => m.id === e.id));
          expect(await storage.insights.listEnvironments(randomUUID())).toEqual([]);
        });

        it("a second environment of the same name in one project throws AlreadyExistsError; other projects may", async () => {
          const project = randomUUID();
          const first = await storage.insights.createEnvironment(environmentRecord(project, "production"));
          await expect(
            storage.insights.createEnvironment(environmentRecord(project, "production")),
          ).rejects.toBeInstanceOf(AlreadyExistsError);
          const elsewhere = environmentRecord(randomUUID(), "production");
          await storage.insights.createEnvironment(elsewhere);
          expect(await storage.insights.listEnvironments(project)).toEqual([first]);
          expect(await storage.insights.getEnvironment(elsewhere.id)).toEqual(elsewhere);
        });
      });

      describe("promotions", () => {
        it("recordPromotion replaces the last promotion of a path; listPromotions gives one environment's", async () => {
          const [env, other] = [randomUUID(), randomUUID()];
          await storage.insights.recordPromotion({
            environmentId: env,
            path: "/templates/a.template",
            date: T0,
            by: "ann",
          });
          await storage.insights.recordPromotion({ environmentId: env, path: "/blocks/b.block", date: T0, by: "bob" });
          await storage.insights.recordPromotion({
            environmentId: other,
            path: "/templates/a.template",
            date: T0,
            by: "eve",
          });
          await storage.insights.recordPromotion({
            environmentId: env,
            path: "/templates/a.template",
            date: T0 + DAY,
            by: "carl",
          });
          expect(await promotionsOf(storage, env)).toEqual([
            { environmentId: env, path: "/blocks/b.block", date: T0, by: "bob" },
            { environmentId: env, path: "/templates/a.template", date: T0 + DAY, by: "carl" },
          ]);
          expect(await promotionsOf(storage, other)).toEqual([
            { environmentId: other, path: "/templates/a.template", date: T0, by: "eve" },
          ]);
          expect(await promotionsOf(storage, randomUUID())).toEqual([]);
        });

        it("listPromotions gives every promotion of a large environment once", async () => {
          const env = randomUUID();
          const paths = Array.from({ length: 1234 }, (_, i) => `/blocks/${String(i).padStart(4, "0")}.block`);
          for (let i = 0; i < paths.length; i += 25) {
            await Promise.all(
              paths
                .slice(i, i + 25)
                .map((path) => storage.insights.recordPromotion({ environmentId: env, path, date: T0, by: "ann" })),
            );
          }
          const listed = await promotionsOf(storage, env);
          expect(listed.map((p) => p.path)).toEqual(paths);
          // Thousands of writes: seconds on a networked backend.
        }, 120_000);
      });

      describe("reports", () => {
        it("createReport stores every field; getReport gives them back, and undefined for an unknown id", async () => {
          const r = reportRecord({
            created: T0 + 123,
            additionalFields: ["lastPromotedDate", "lastPromotedBy"],
            expiresAt: T0 + 90 * DAY + 7,
            creator: "ann@example.com",
          });
          await storage.insights.createReport(r);
          expect(await storage.insights.getReport(r.id)).toEqual(r);
          expect(await storage.insights.getReport(randomUUID())).toBeUndefined();
          const plain = reportRecord();
          await storage.insights.createReport(plain);
          expect((await report(plain.id)).additionalFields).toEqual([]);
        });

        it("listReports gives one environment's reports of a project, newest first, expired ones included", async () => {
          const [project, env] = [randomUUID(), randomUUID()];
          const mine = [
            reportRecord({ projectId: project, environmentId: env, created: T0 + 2 * SECOND }),
            reportRecord({ projectId: project, environmentId: env, created: T0, expiresAt: T0 + 1 }),
            reportRecord({ projectId: project, environmentId: env, created: T0 + 5 * SECOND, additionalFields: ["x"] }),
          ];
          for (const r of mine) await storage.insights.createReport(r);
          await storage.insights.createReport(reportRecord({ projectId: project, environmentId: randomUUID() }));
          await storage.insights.createReport(reportRecord({ projectId: randomUUID(), environmentId: env }));
          expect(await storage.insights.listReports(project, env)).toEqual([mine[2], mine[0], mine[1]]);
          expect(await storage.insights.listReports(project, randomUUID())).toEqual([]);
        });

        it("claimReportJob takes the oldest claimable job, skips held leases, and gives undefined when none", async () => {
          const held = reportRecord({ created: T0, leaseOwner: "other", leaseExpires: T0 + 10 * SECOND });
          const newer = reportRecord({ created: T0 + 2 * SECOND });
          const older = reportRecord({ created: T0 + SECOND });
          for (const r of [held, newer, older]) await storage.insights.createReport(r);
          const now = T0 + 5 * SECOND;

          const first = await storage.insights.claimReportJob("w1", now, LEASE);
          expect(first).toEqual({ ...older, leaseOwner: "w1", leaseExpires: now + LEASE, attempts: 1 });
          expect(await report(older.id)).toEqual(first);
          const second = await storage.insights.claimReportJob("w2", now, LEASE);
          expect(second).toEqual({ ...newer, leaseOwner: "w2", leaseExpires: now + LEASE, attempts: 1 });
          expect(await storage.insights.claimReportJob("w3", now, LEASE)).toBeUndefined();
          expect(await report(held.id)).toEqual(held);

          // The held lease ends at T0 + 10 s: from that instant on, its job may be taken.
          const third = await storage.insights.claimReportJob("w3", T0 + 10 * SECOND, LEASE);
          expect(third).toMatchObject({ id: held.id, leaseOwner: "w3", attempts: 1 });
        });

        it("an expired lease is claimed again, with one more attempt; the old holder can no longer update", async () => {
          const r = reportRecord();
          await storage.insights.createReport(r);
          const first = await storage.insights.claimReportJob("w1", T0, LEASE);
          expect(first).toMatchObject({ id: r.id, leaseOwner: "w1", leaseExpires: T0 + LEASE, attempts: 1 });
          expect(await storage.insights.claimReportJob("w2", T0 + LEASE - 1, LEASE)).toBeUndefined();
          const again = await storage.insights.claimReportJob("w2", T0 + LEASE, LEASE);
          expect(again).toMatchObject({ id: r.id, leaseOwner: "w2", leaseExpires: T0 + 2 * LEASE, attempts: 2 });
          expect(await storage.insights.updateReportJob(r.id, "w1", { leaseExpires: T0 + 5 * LEASE })).toBe(false);
          expect(await report(r.id)).toEqual(again);
        });

        it("finished reports are never claimed", async () => {
          const r = reportRecord();
          await storage.insights.createReport(r);
          await storage.insights.claimReportJob("w1", T0, LEASE);
          await storage.insights.updateReportJob(r.id, "w1", {
            status: "failed",
            finished: T0,
            reason: "no environment",
          });
          expect(await storage.insights.claimReportJob("w2", T0 + DAY, LEASE)).toBeUndefined();
          expect(await report(r.id)).toMatchObject({ status: "failed", reason: "no environment", attempts: 1 });
        });

        it("of concurrent claims of one job, exactly one wins", async () => {
          for (let round = 0; round < 5; round++) {
            const r = reportRecord({ created: T0 + round });
            await storage.insights.createReport(r);
            const now = T0 + round * 2 * LEASE;
            const claims = await Promise.all(
              Array.from({ length: 8 }, (_, i) => storage.insights.claimReportJob(`w${round}-${i}`, now, LEASE)),
            );
            const won = claims.filter((c) => c !== undefined);
            expect(won).toHaveLength(1);
            expect(won[0]).toMatchObject({ id: r.id, attempts: 1 });
            expect(await report(r.id)).toEqual(won[0]);
            // Done: the next round's job is the only one claimable.
            await storage.insights.updateReportJob(r.id, won[0]?.leaseOwner as string, {
              status: "generated",
              finished: now,
            });
          }
        });

        it("concurrent claims of several jobs take each job once", async () => {
          const jobs = Array.from({ length: 4 }, (_, i) => reportRecord({ created: T0 + i }));
          for (const r of jobs) await storage.insights.createReport(r);
          const claims = await Promise.all(
            Array.from({ length: 10 }, (_, i) => storage.insights.claimReportJob(`w${i}`, T0 + SECOND, LEASE)),
          );
          const ids = claims.filter((c) => c !== undefined).map((c) => c.id);
          expect(ids.sort()).toEqual(jobs.map((j) => j.id).sort());
          for (const c of claims.filter((c) => c !== undefined)) expect(await report(c.id)).toEqual(c);
        });

        it("updateReportJob applies an update only for the lease holder of a generating job", async () => {
          const r = reportRecord();
          await storage.insights.createReport(r);
          // No one holds a new job: not even an empty owner may change it.
          expect(await storage.insights.updateReportJob(r.id, "", { reason: "x" })).toBe(false);
          expect(await storage.insights.updateReportJob(r.id, "w1", { reason: "x" })).toBe(false);
          const claimed = await storage.insights.claimReportJob("w1", T0, LEASE);
          expect(await storage.insights.updateReportJob(r.id, "w2", { leaseExpires: T0 + 9 * LEASE })).toBe(false);
          expect(await report(r.id)).toEqual(claimed);

          // A heartbeat, then a failed attempt's reason: only the named fields change.
          expect(await storage.insights.updateReportJob(r.id, "w1", { leaseExpires: T0 + 2 * LEASE })).toBe(true);
          expect(await storage.insights.updateReportJob(r.id, "w1", { reason: "parser crashed" })).toBe(true);
          expect(await report(r.id)).toEqual({
            ...r,
            attempts: 1,
            leaseOwner: "w1",
            leaseExpires: T0 + 2 * LEASE,
            reason: "parser crashed",
          });

          expect(
            await storage.insights.updateReportJob(r.id, "w1", {
              status: "failed",
              finished: T0 + SECOND,
              expiresAt: T0 + SECOND + 90 * DAY,
              reason: "environment is empty",
            }),
          ).toBe(true);
          const failed = await report(r.id);
          expect(failed).toMatchObject({
            status: "failed",
            finished: T0 + SECOND,
            expiresAt: T0 + SECOND + 90 * DAY,
            reason: "environment is empty",
            leaseOwner: "w1",
          });
          // Finished: the former holder may change it no more.
          expect(await storage.insights.updateReportJob(r.id, "w1", { status: "generated", reason: "" })).toBe(false);
          expect(await report(r.id)).toEqual(failed);
          expect(await storage.insights.updateReportJob(randomUUID(), "w1", { reason: "x" })).toBe(false);
        });

        it("a small document round-trips through writeBlob, updateReportJob and readReportDocument", async () => {
          const r = reportRecord();
          await storage.insights.createReport(r);
          await storage.insights.claimReportJob("w1", T0, LEASE);
          const json = text(JSON.stringify({ version: "1.0", resources: [{ name: "été \u{1F600}" }] }));
          const document = await finishWithDocument(r, "w1", json, T0 + SECOND);
          const stored = await report(r.id);
          expect(stored).toMatchObject({
            status: "generated",
            finished: T0 + SECOND,
            expiresAt: T0 + SECOND + 90 * DAY,
            leaseOwner: "",
            document: { blob: document.blob, size: json.byteLength, md5: md5(json) },
          });
          expect((await readDocument(storage, stored)).equals(Buffer.from(json))).toBe(true);
        });

        it(`a document larger than ${inlineLimit} bytes streams back byte for byte`, async () => {
          const r = reportRecord();
          await storage.insights.createReport(r);
          await storage.insights.claimReportJob("w1", T0, LEASE);
          const data = randomBytes(3 * inlineLimit + 4321);
          const document = await finishWithDocument(r, "w1", data, T0 + SECOND);
          const stored = await report(r.id);
          expect(stored.document).toEqual({ blob: document.blob, size: data.byteLength, md5: md5(data), inline: null });
          expect((await readDocument(storage, stored)).equals(data)).toBe(true);
          if (adapter.storedBlobs) expect(await adapter.storedBlobs()).toContain(document.blob);
        });

        it("readReportDocument of a report without a document throws NotFoundError", async () => {
          const r = reportRecord();
          await storage.insights.createReport(r);
          await expect(readDocument(storage, r)).rejects.toBeInstanceOf(NotFoundError);
          await expect(readDocument(storage, reportRecord())).rejects.toBeInstanceOf(NotFoundError);
        });

        it("getReport gives an expired report until it is purged", async () => {
          const r = reportRecord({ expiresAt: T0 + SECOND });
          await storage.insights.createReport(r);
          expect(await storage.insights.getReport(r.id)).toEqual(r);
        });

        it("purgeExpired removes expired reports with their documents and leaves the others", async () => {
          const reports: Record<string, ReportRecord> = {};
          const data: Record<string, Buffer> = {};
          // Finished at T0 (expires T0 + 90 days) or at T0 + 1 day; one never finishes.
          for (const [key, size, finishedAt] of [
            ["oldSmall", 100, T0],
            ["oldLarge", 2 * inlineLimit, T0],
            ["newSmall", 100, T0 + DAY],
            ["newLarge", 2 * inlineLimit, T0 + DAY],
          ] as const) {
            const r = reportRecord();
            await storage.insights.createReport(r);
            await storage.insights.claimReportJob("w1", T0, LEASE);
            data[key] = randomBytes(size);
            await finishWithDocument(r, "w1", data[key], finishedAt);
            reports[key] = await report(r.id);
          }
          const stuck = reportRecord({ expiresAt: T0 + 90 * DAY });
          await storage.insights.createReport(stuck);
          const blobsBefore = await blobsNow();

          expect(await storage.purgeExpired(T0 + 90 * DAY - 1)).toBe(0);
          // expiresAt <= now: from that very instant on.
          expect(await storage.purgeExpired(T0 + 90 * DAY)).toBe(3);
          for (const key of ["oldSmall", "oldLarge"]) {
            const gone = reports[key] as ReportRecord;
            expect(await storage.insights.getReport(gone.id)).toBeUndefined();
            await expect(readDocument(storage, gone)).rejects.toBeInstanceOf(NotFoundError);
          }
          expect(await storage.insights.getReport(stuck.id)).toBeUndefined();
          for (const key of ["newSmall", "newLarge"]) {
            const kept = reports[key] as ReportRecord;
            expect(await storage.insights.getReport(kept.id)).toEqual(kept);
            expect((await readDocument(storage, kept)).equals(data[key] as Buffer)).toBe(true);
          }
          if (blobsBefore) {
            const oldLarge = reports.oldLarge?.document?.blob as string;
            expect(blobsBefore).toContain(oldLarge);
            expect(await blobsNow()).toEqual(blobsBefore.filter((b) => b !== oldLarge));
          }
          expect(await storage.purgeExpired(T0 + 90 * DAY)).toBe(0);
        });

        it("purgeExpired counts purged tombstones and reports together", async () => {
          await storage.createStore(config("s", "snapshot", "1s"), T0);
          await put("s", "a.txt", "a");
          await storage.deleteTree("s", "a.txt", {}, T0);
          await storage.insights.createReport(reportRecord({ expiresAt: T0 + SECOND }));
          expect(await storage.purgeExpired(T0 + 10 * SECOND)).toBe(2);
        });
      });
    });

    // Issue 11, item 1: putFile and updateReportJob own the blob they are given from the call on.
    describe("a write that did not happen removes the blob it was given", () => {
      beforeEach(async () => {
        await storage.createStore(config("s", "snapshot"), T0);
        await mkdir("s", "dir");
      });

      async function large(store?: string): Promise<BlobInfo> {
        return storage.writeBlob(chunked(randomBytes(inlineLimit * 2)), { maxSize: MAX, store });
      }

      const refusals: Array<[string, string, string, Preconditions, new (...args: never[]) => Error]> = [
        ["putFile that fails its precondition", "s", "a.bin", { ifMatch: ["stale"] }, PreconditionFailedError],
        ["putFile whose parent is missing", "s", "no/such/a.bin", {}, NotFoundError],
        ["putFile into a store that does not exist", "nowhere", "a.bin", {}, NotFoundError],
        ["putFile of a file named like a directory", "s", "dir", {}, ForbiddenError],
      ];
      for (const [title, inStore, path, pre, refusal] of refusals) {
        it(`${title} removes the blob it was given`, async () => {
          const before = await blobsNow();
          const blob = await large(inStore);
          await expect(
            storage.putFile(inStore, path, blob, "application/octet-stream", pre, T0),
          ).rejects.toBeInstanceOf(refusal);
          await expect(readAll(storage, nodeOf(blob))).rejects.toBeInstanceOf(NotFoundError);
          expect(await blobsNow()).toEqual(before);
          // The caller discarding it as well (as callers did before) is harmless.
          await expect(storage.discardBlob(blob)).resolves.toBeUndefined();
        });
      }

      it("a refused replacement removes the new blob and keeps the stored one", async () => {
        const first = randomBytes(inlineLimit * 2);
        const { node: v1 } = await put("s", "a.bin", first);
        const blob = await large("s");
        await expect(
          storage.putFile("s", "a.bin", blob, "application/octet-stream", { ifMatch: ["stale"] }, T0),
        ).rejects.toBeInstanceOf(PreconditionFailedError);
        await expect(readAll(storage, nodeOf(blob))).rejects.toBeInstanceOf(NotFoundError);
        expect((await readAll(storage, await node("s", "a.bin"))).equals(first)).toBe(true);
        const blobs = await blobsNow();
        if (blobs) expect(blobs).toEqual([v1.blob]);
      });

      it("discardBlob of a blob that is already gone does not throw", async () => {
        const blob = await large();
        await storage.discardBlob(blob);
        await expect(storage.discardBlob(blob)).resolves.toBeUndefined();
      });

      it("updateReportJob that does not apply removes the document it was given", async () => {
        const report = reportRecord();
        await storage.insights.createReport(report);
        expect(await storage.insights.claimReportJob("w", T0, 30 * SECOND)).toMatchObject({ id: report.id });
        const before = await blobsNow();
        const document = await large();
        // Not the holder: refused, and the document is the adapter's to remove.
        expect(await storage.insights.updateReportJob(report.id, "intruder", { status: "generated", document })).toBe(
          false,
        );
        expect(await blobsNow()).toEqual(before);
        expect(await storage.insights.getReport(report.id)).toMatchObject({ status: "generating", document: null });
        // The holder's update applies and keeps its own document.
        const kept = await large();
        expect(await storage.insights.updateReportJob(report.id, "w", { status: "generated", document: kept })).toBe(
          true,
        );
        const done = await storage.insights.getReport(report.id);
        expect((await readDocument(storage, done as ReportRecord)).byteLength).toBe(inlineLimit * 2);
      });
    });

    describe("history (docs/history.md)", () => {
      /** A store that keeps versions (keep-versions above 0). */
      function keeping(
        name: string,
        type: StoreType = "snapshot",
        keepVersions = "30d",
        keepDeleted = "7d",
      ): StoreConfig {
        return { name, type, settings: { "keep-deleted": keepDeleted, "keep-versions": keepVersions } };
      }

      async function versionsOf(store: string, path: string, batchSize?: number): Promise<VersionRecord[]> {
        const out: VersionRecord[] = [];
        for await (const batch of storage.listVersions(store, path, { batchSize })) out.push(...batch);
        return out;
      }

      async function listAsOf(
        store: string,
        dir: string,
        eventId: number,
        options: { recursive: boolean; includeDeleted?: boolean; batchSize?: number },
      ): Promise<VersionRecord[]> {
        const out: VersionRecord[] = [];
        for await (const batch of storage.listNodesAsOf(store, dir, eventId, { includeDeleted: false, ...options })) {
          expect(batch.length).toBeLessThanOrEqual(options.batchSize ?? Number.POSITIVE_INFINITY);
          out.push(...batch);
        }
        return out;
      }

      /** What a state shows of a path: enough to tell two states apart. */
      function shown(n: NodeRecord): Pick<NodeRecord, "path" | "directory" | "deleted" | "tag" | "eventId" | "md5"> {
        return { path: n.path, directory: n.directory, deleted: n.deleted, tag: n.tag, eventId: n.eventId, md5: n.md5 };
      }

      async function remove(store: string, path: string, options: { now?: number; user?: string } = {}) {
        return storage.deleteTree(store, path, {}, options.now ?? T0, options.user);
      }

      describe("recording", () => {
        it("a PUT over a file keeps the replaced state, ended by the new state's event, with the user of each", async () => {
          await storage.createStore(keeping("s"), T0);
          const one = randomBytes(inlineLimit + 10);
          const { node: first } = await put("s", "a.bin", one, { user: "ann" });
          const { node: second } = await put("s", "a.bin", "two", { now: T0 + SECOND, user: "bob" });

          const versions = await versionsOf("s", "a.bin");
          expect(versions).toHaveLength(2);
          expect(versions[0]).toMatchObject({
            ...shown(second),
            blob: second.blob,
            user: "bob",
            endedEventId: 0,
            ended: 0,
          });
          expect(versions[1]).toMatchObject({
            ...shown(first),
            size: one.byteLength,
            blob: first.blob,
            type: "text/plain",
            created: T0,
            modified: T0,
            user: "ann",
            endedEventId: second.eventId,
            ended: T0 + SECOND,
          });
          // The replaced contents stay while the version points at them.
          expect((await readAll(storage, versions[1] as VersionRecord)).equals(one)).toBe(true);
          const blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([first.blob].sort());
        });

        it("a state made without a user records the user as empty", async () => {
          await storage.createStore(keeping("s"), T0);
          await put("s", "a.txt", "one");
          await put("s", "a.txt", "two", { now: T0 + SECOND, user: "bob" });
          expect((await versionsOf("s", "a.txt")).map((v) => v.user)).toEqual(["bob", ""]);
        });

        it("a recursive delete keeps the state of every file and directory it deletes", async () => {
          await storage.createStore(keeping("s"), T0);
          await mkdir("s", "d");
          await mkdir("s", "d/e");
          const big = randomBytes(inlineLimit * 2);
          const { node: a } = await put("s", "d/a.txt", "a", { user: "ann" });
          const { node: b } = await put("s", "d/e/b.bin", big, { user: "ann" });
          const dirs = { d: await node("s", "d"), e: await node("s", "d/e") };
          const { count } = await remove("s", "d", { now: T0 + SECOND, user: "carol" });
          expect(count).toBe(4);

          for (const before of [a, b, dirs.d, dirs.e]) {
            const versions = await versionsOf("s", before.path);
            expect(versions).toHaveLength(2);
            const [tombstone, kept] = versions as [VersionRecord, VersionRecord];
            expect(tombstone).toMatchObject({ path: before.path, deleted: true, user: "carol", endedEventId: 0 });
            expect(kept).toMatchObject({
              ...shown(before),
              deleted: false,
              endedEventId: tombstone.eventId,
              ended: T0 + SECOND,
            });
          }
          expect((await versionsOf("s", "d/a.txt"))[1]?.user).toBe("ann");
          const keptBig = (await versionsOf("s", "d/e/b.bin"))[1] as VersionRecord;
          expect((await readAll(storage, keptBig)).equals(big)).toBe(true);
          const blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([b.blob]);
        });

        it("in a recursive store, each ancestor directory's earlier state is kept when a change re-tags it", async () => {
          await storage.createStore(keeping("s", "recursive"), T0);
          await mkdir("s", "d");
          const dBefore = await node("s", "d");
          const rootBefore = await node("s", "");
          const { node: file } = await put("s", "d/a.txt", "a", { now: T0 + SECOND, user: "ann" });
          const dNow = await node("s", "d");
          const rootNow = await node("s", "");
          expect(dNow.tag).not.toBe(dBefore.tag);

          const dVersions = await versionsOf("s", "d");
          expect(dVersions.map(shown)).toEqual([shown(dNow), shown(dBefore)]);
          expect(dVersions[0]?.user).toBe("ann");
          expect(dVersions[1]).toMatchObject({ endedEventId: dNow.eventId, ended: T0 + SECOND });
          const rootVersions = await versionsOf("s", "");
          expect(rootVersions.slice(0, 2).map(shown)).toEqual([shown(rootNow), shown(rootBefore)]);
          expect(rootVersions[1]?.endedEventId).toBe(rootNow.eventId);
          // The directory's state at the file's event is still the earlier one: its re-tag came after.
          expect(dNow.eventId).toBeGreaterThan(file.eventId);
        });

        it("in a snapshot store, ancestor directories keep their states and no version of them is made", async () => {
          await storage.createStore(keeping("s", "snapshot"), T0);
          await mkdir("s", "d");
          await put("s", "d/a.txt", "a");
          await put("s", "d/a.txt", "b");
          expect(await versionsOf("s", "d")).toHaveLength(1);
          expect(await versionsOf("s", "")).toHaveLength(1);
        });

        it("a path made again over its tombstone keeps the tombstone's state", async () => {
          await storage.createStore(keeping("s"), T0);
          const { node: first } = await put("s", "a.txt", "one");
          const { node: tombstone } = await remove("s", "a.txt", { now: T0 + SECOND });
          const { node: again, created } = await put("s", "a.txt", "again", { now: T0 + 2 * SECOND });
          expect(created).toBe(true);
          const versions = await versionsOf("s", "a.txt");
          expect(versions.map(shown)).toEqual([shown(again), shown(tombstone), shown(first)]);
          expect(versions[1]).toMatchObject({ deleted: true, endedEventId: again.eventId, ended: T0 + 2 * SECOND });
          expect(versions[2]).toMatchObject({ endedEventId: tombstone.eventId });
        });

        it("keep-versions 0 (or none) keeps nothing: replaced and deleted states leave no version, and their blobs go", async () => {
          await storage.createStore(config("none"), T0);
          await storage.createStore(keeping("zero", "recursive", "0"), T0);
          for (const s of ["none", "zero"]) {
            await mkdir(s, "d");
            const { node: first } = await put(s, "d/a.bin", randomBytes(inlineLimit * 2));
            await put(s, "d/a.bin", randomBytes(inlineLimit * 2), { now: T0 + SECOND });
            await remove(s, "d", { now: T0 + 2 * SECOND });
            const versions = await versionsOf(s, "d/a.bin");
            expect(versions).toHaveLength(1);
            expect(versions[0]).toMatchObject({ deleted: true, endedEventId: 0 });
            expect(await versionsOf(s, "d")).toHaveLength(1);
            expect(await versionsOf(s, "")).toHaveLength(1);
            expect(await storage.getVersion(s, "d/a.bin", first.tag)).toBeUndefined();
          }
          const blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([]);
        });
      });

      describe("reading", () => {
        it("listVersions gives the current state first, then the kept ones newest first, in batches of at most batchSize", async () => {
          await storage.createStore(keeping("s"), T0);
          const made: NodeRecord[] = [];
          for (let i = 0; i < 5; i++) made.push((await put("s", "a.txt", `v${i}`, { now: T0 + i * SECOND })).node);
          const sizes: number[] = [];
          const all: VersionRecord[] = [];
          for await (const batch of storage.listVersions("s", "a.txt", { batchSize: 2 })) {
            sizes.push(batch.length);
            all.push(...batch);
          }
          expect(sizes.every((n) => n >= 1 && n <= 2)).toBe(true);
          expect(all.map(shown)).toEqual(made.reverse().map(shown));
          expect(all[0]?.endedEventId).toBe(0);
          for (let i = 1; i < all.length; i++) {
            expect(all[i]?.endedEventId).toBe(all[i - 1]?.eventId);
            expect(all[i]?.ended).toBe(all[i - 1]?.modified);
          }
          expect(await versionsOf("s", "never.txt")).toEqual([]);
          expect(await versionsOf("nope", "a.txt")).toEqual([]);
        });

        it("getVersion finds the current state and kept ones by tag, with their contents; undefined otherwise", async () => {
          await storage.createStore(keeping("s"), T0);
          const big = randomBytes(inlineLimit * 2);
          const { node: first } = await put("s", "a.bin", big);
          const { node: second } = await put("s", "a.bin", "small", { now: T0 + SECOND, user: "bob" });
          const current = await storage.getVersion("s", "a.bin", second.tag);
          expect(current).toMatchObject({ ...shown(second), user: "bob", endedEventId: 0, ended: 0 });
          expect((await readAll(storage, current as VersionRecord)).toString()).toBe("small");
          const kept = await storage.getVersion("s", "a.bin", first.tag);
          expect(kept).toMatchObject({ ...shown(first), blob: first.blob, endedEventId: second.eventId });
          expect((await readAll(storage, kept as VersionRecord)).equals(big)).toBe(true);
          expect(await storage.getVersion("s", "a.bin", "no-such-tag")).toBeUndefined();
          expect(await storage.getVersion("s", "other.bin", first.tag)).toBeUndefined();
        });

        it("getNodeAsOf gives the state whose life holds the event: before, between and after changes, deleted included", async () => {
          await storage.createStore(keeping("s"), T0);
          const start = (await store("s")).lastEventId;
          const { node: one } = await put("s", "a.txt", "one");
          const { node: two } = await put("s", "a.txt", "two", { now: T0 + SECOND });
          const { node: gone } = await remove("s", "a.txt", { now: T0 + 2 * SECOND });
          await put("s", "other.txt", "x", { now: T0 + 3 * SECOND });
          const { node: three } = await put("s", "a.txt", "three", { now: T0 + 4 * SECOND });

          expect(await storage.getNodeAsOf("s", "a.txt", start)).toBeUndefined();
          const at = async (event: number) => {
            const state = await storage.getNodeAsOf("s", "a.txt", event);
            return state && shown(state);
          };
          expect(await at(one.eventId)).toEqual(shown(one));
          expect(await at(two.eventId - 1)).toEqual(shown(one));
          expect(await at(two.eventId)).toEqual(shown(two));
          expect(await at(gone.eventId)).toEqual(shown(gone));
          expect(await at(three.eventId - 1)).toEqual(shown(gone));
          expect(await at(three.eventId)).toEqual(shown(three));
          expect(await at((await store("s")).lastEventId)).toEqual(shown(three));
          const then = await storage.getNodeAsOf("s", "a.txt", two.eventId);
          expect(then).toMatchObject({ endedEventId: gone.eventId });
          expect((await readAll(storage, then as VersionRecord)).toString()).toBe("two");
          expect(await storage.getNodeAsOf("s", "never.txt", three.eventId)).toBeUndefined();
        });

        it("listNodesAsOf lists children and descendants as they were: later paths absent, later deleted ones present", async () => {
          await storage.createStore(keeping("s", "recursive"), T0);
          await mkdir("s", "d");
          await mkdir("s", "d/old");
          await put("s", "d/a.txt", "a");
          await put("s", "d/b.txt", "b");
          await put("s", "d/old/x.txt", "x");
          await put("s", "d/gone.txt", "gone");
          await remove("s", "d/gone.txt");
          await put("s", "top.txt", "top");
          const event = (await store("s")).lastEventId;
          const everything = await listAll(storage, "s", "", { recursive: true, includeDeleted: true });
          const children = await listAll(storage, "s", "d", { recursive: false, includeDeleted: true });

          await put("s", "d/c.txt", "c", { now: T0 + SECOND });
          await remove("s", "d/a.txt", { now: T0 + SECOND });
          await put("s", "d/b.txt", "b2", { now: T0 + SECOND });
          await remove("s", "d/old", { now: T0 + SECOND });
          await mkdir("s", "d/new", T0 + SECOND);
          await put("s", "d/new/y.txt", "y", { now: T0 + SECOND });
          await put("s", "top.txt", "top2", { now: T0 + SECOND });

          expect((await listAsOf("s", "d", event, { recursive: false, includeDeleted: true })).map(shown)).toEqual(
            children.map(shown),
          );
          expect((await listAsOf("s", "d", event, { recursive: false })).map((n) => n.path)).toEqual([
            "d/a.txt",
            "d/b.txt",
            "d/old",
          ]);
          expect(
            (await listAsOf("s", "", event, { recursive: true, includeDeleted: true, batchSize: 2 })).map(shown),
          ).toEqual(everything.map(shown));
          expect((await listAsOf("s", "d", event, { recursive: true })).map((n) => n.path)).toEqual([
            "d/a.txt",
            "d/b.txt",
            "d/old",
            "d/old/x.txt",
          ]);
          // As of the last event, a listing is today's.
          const last = (await store("s")).lastEventId;
          expect((await listAsOf("s", "", last, { recursive: true, includeDeleted: true })).map(shown)).toEqual(
            (await listAll(storage, "s", "", { recursive: true, includeDeleted: true })).map(shown),
          );
          const b = (await listAsOf("s", "d", event, { recursive: false })).find((n) => n.path === "d/b.txt");
          expect((await readAll(storage, b as VersionRecord)).toString()).toBe("b");
          expect(await listAsOf("s", "d/new", event, { recursive: true, includeDeleted: true })).toEqual([]);
        });

        it("listNodesAsOf in pages of any size: directories re-tagged by many writes below, a path that was a file, then a directory, then a file", async () => {
          await storage.createStore(keeping("s", "recursive"), T0);
          const moments: Array<{ event: number; all: NodeRecord[]; children: NodeRecord[] }> = [];
          const moment = async () => {
            moments.push({
              event: (await store("s")).lastEventId,
              all: await listAll(storage, "s", "", { recursive: true, includeDeleted: true }),
              children: await listAll(storage, "s", "", { recursive: false, includeDeleted: true }),
            });
          };
          for (const d of ["a", "b", "c"]) await mkdir("s", d);
          await put("s", "b/y.txt", "y");
          for (let i = 0; i < 20; i++) await put("s", "a/x.txt", `x${i}`);
          await moment();
          await put("s", "f", "a file");
          await mkdir("s", "c/deep");
          await put("s", "c/deep/z.txt", "z");
          await moment();
          await remove("s", "f");
          await mkdir("s", "f");
          await put("s", "f/z.txt", "z");
          await moment();
          await remove("s", "f");
          await put("s", "f", "a file again");
          await moment();
          for (let i = 0; i < 5; i++) await put("s", "c/deep/z.txt", `z${i}`);
          await remove("s", "a");
          await mkdir("s", "b/later");

          for (const { event, all, children } of moments) {
            for (const batchSize of [1, 2, 3, 1000]) {
              const asOf = await listAsOf("s", "", event, { recursive: true, includeDeleted: true, batchSize });
              expect(asOf.map(shown), `event ${event}, pages of ${batchSize}`).toEqual(all.map(shown));
              const top = await listAsOf("s", "", event, { recursive: false, includeDeleted: true, batchSize });
              expect(top.map(shown), `children, event ${event}, pages of ${batchSize}`).toEqual(children.map(shown));
            }
            const below = (dir: string) => all.filter((n) => n.path.startsWith(`${dir}/`)).map(shown);
            for (const dir of ["a", "c", "f"]) {
              const asOf = await listAsOf("s", dir, event, { recursive: true, includeDeleted: true, batchSize: 1 });
              expect(asOf.map(shown), `below ${dir}, event ${event}`).toEqual(below(dir));
            }
          }
        });

        it("eventAt gives the store's last event made at or before a time, 0 before its first", async () => {
          await storage.createStore(keeping("s", "recursive"), T0);
          const created = (await store("s")).lastEventId;
          await mkdir("s", "d", T0 + SECOND);
          const afterMkdir = (await store("s")).lastEventId;
          await put("s", "d/a.txt", "a", { now: T0 + 2 * SECOND });
          const afterPut = (await store("s")).lastEventId;
          await put("s", "d/a.txt", "b", { now: T0 + 3 * SECOND });
          const afterReplace = (await store("s")).lastEventId;
          await remove("s", "d", { now: T0 + 4 * SECOND });
          const afterDelete = (await store("s")).lastEventId;

          expect(await storage.eventAt("s", T0 - 1)).toBe(0);
          expect(await storage.eventAt("s", T0)).toBe(created);
          expect(await storage.eventAt("s", T0 + SECOND - 1)).toBe(created);
          // A change's last event is that of the last ancestor it re-tagged.
          expect(await storage.eventAt("s", T0 + SECOND)).toBe(afterMkdir);
          expect(await storage.eventAt("s", T0 + 2 * SECOND + 500)).toBe(afterPut);
          expect(await storage.eventAt("s", T0 + 3 * SECOND)).toBe(afterReplace);
          expect(await storage.eventAt("s", T0 + 4 * SECOND)).toBe(afterDelete);
          expect(await storage.eventAt("s", T0 + DAY)).toBe(afterDelete);
        });

        it("eventAt of a store without history gives its last event for a time after its last change, re-tags included", async () => {
          await storage.createStore(config("s"), T0);
          await mkdir("s", "d", T0 + SECOND);
          await put("s", "d/a.txt", "a", { now: T0 + 2 * SECOND });
          const last = (await store("s")).lastEventId;
          expect((await node("s", "")).eventId).toBe(last);
          expect(await storage.eventAt("s", T0 + 2 * SECOND)).toBe(last);
          expect(await storage.eventAt("s", T0 + DAY)).toBe(last);
          expect(await storage.eventAt("s", T0 + 2 * SECOND - 1)).toBeLessThan((await node("s", "d/a.txt")).eventId);
        });
      });

      describe("restoreVersion", () => {
        it("makes a kept state current again: a new tag and event, the version's MD5 and blob, the caller as user", async () => {
          await storage.createStore(keeping("s", "recursive"), T0);
          await mkdir("s", "d");
          const one = randomBytes(inlineLimit * 2);
          const { node: first } = await put("s", "d/a.bin", one);
          const { node: second } = await put("s", "d/a.bin", "two", { now: T0 + SECOND });
          const dirBefore = await node("s", "d");
          const { node: restored, created } = await storage.restoreVersion(
            "s",
            "d/a.bin",
            first.tag,
            {},
            T0 + 2 * SECOND,
            "dave",
          );
          expect(created).toBe(false);
          expect(restored).toMatchObject({
            path: "d/a.bin",
            directory: false,
            deleted: false,
            prevTag: second.tag,
            md5: first.md5,
            size: first.size,
            blob: first.blob,
            type: first.type,
            created: T0,
            modified: T0 + 2 * SECOND,
          });
          expect(restored.tag).not.toBe(first.tag);
          expect(restored.tag).not.toBe(second.tag);
          expect(restored.eventId).toBeGreaterThan(second.eventId);
          expect(await storage.getNode("s", "d/a.bin")).toEqual(restored);
          expect((await readAll(storage, await node("s", "d/a.bin"))).equals(one)).toBe(true);
          expect((await node("s", "d")).tag).not.toBe(dirBefore.tag);
          const versions = await versionsOf("s", "d/a.bin");
          expect(versions.map(shown)).toEqual([shown(restored), shown(second), shown(first)]);
          expect(versions[0]?.user).toBe("dave");
          expect(versions[1]?.endedEventId).toBe(restored.eventId);
          // The blob is shared, not copied.
          const blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([first.blob]);
        });

        it("brings a deleted file back as a new resource (created), If-Match * refused", async () => {
          await storage.createStore(keeping("s"), T0);
          const { node: first } = await put("s", "a.txt", "one");
          await remove("s", "a.txt", { now: T0 + SECOND });
          await expect(
            storage.restoreVersion("s", "a.txt", first.tag, { ifMatch: ["*"] }, T0 + 2 * SECOND),
          ).rejects.toBeInstanceOf(PreconditionFailedError);
          const { node: back, created } = await storage.restoreVersion("s", "a.txt", first.tag, {}, T0 + 2 * SECOND);
          expect(created).toBe(true);
          expect(back).toMatchObject({ deleted: false, md5: first.md5, prevTag: "", created: T0 + 2 * SECOND });
          expect((await readAll(storage, await node("s", "a.txt"))).toString()).toBe("one");
        });

        it("honours If-Match against the current state", async () => {
          await storage.createStore(keeping("s"), T0);
          const { node: first } = await put("s", "a.txt", "one");
          const { node: second } = await put("s", "a.txt", "two", { now: T0 + SECOND });
          await expect(
            storage.restoreVersion("s", "a.txt", first.tag, { ifMatch: [first.tag] }, T0 + 2 * SECOND),
          ).rejects.toBeInstanceOf(PreconditionFailedError);
          expect(await node("s", "a.txt")).toEqual(second);
          const { node: restored } = await storage.restoreVersion(
            "s",
            "a.txt",
            first.tag,
            { ifMatch: [second.tag] },
            T0 + 2 * SECOND,
          );
          expect(restored.md5).toBe(first.md5);
        });

        it("refusals change nothing: an unknown tag, a tombstone's or a directory's tag, a missing parent, a directory in the way", async () => {
          await storage.createStore(keeping("s"), T0);
          await mkdir("s", "d");
          const { node: inDir } = await put("s", "d/a.txt", "one");
          await put("s", "d/a.txt", "two");
          const { node: x } = await put("s", "x", "file");
          const { node: xGone } = await remove("s", "x");
          const { node: xDir } = await mkdir("s", "x");
          await remove("s", "d");
          const before = await store("s");
          const everything = await listAll(storage, "s", "", { recursive: true, includeDeleted: true });

          await expect(storage.restoreVersion("s", "x", "no-such-tag", {}, T0)).rejects.toBeInstanceOf(NotFoundError);
          await expect(storage.restoreVersion("s", "x", xGone.tag, {}, T0)).rejects.toBeInstanceOf(NotFoundError);
          await expect(storage.restoreVersion("s", "x", xDir.tag, {}, T0)).rejects.toBeInstanceOf(NotFoundError);
          await expect(storage.restoreVersion("s", "x", x.tag, {}, T0)).rejects.toBeInstanceOf(ForbiddenError);
          await expect(storage.restoreVersion("s", "d/a.txt", inDir.tag, {}, T0)).rejects.toBeInstanceOf(NotFoundError);
          await expect(storage.restoreVersion("nope", "x", x.tag, {}, T0)).rejects.toBeInstanceOf(NotFoundError);

          expect((await store("s")).lastEventId).toBe(before.lastEventId);
          expect(await listAll(storage, "s", "", { recursive: true, includeDeleted: true })).toEqual(everything);
        });
      });

      describe("retention", () => {
        it("blobs of kept states outlive their node: read back after the path is deleted and its tombstone purged", async () => {
          await storage.createStore(keeping("s", "snapshot", "30d", "1s"), T0);
          const big = randomBytes(inlineLimit * 2);
          const { node: first } = await put("s", "a.bin", big);
          await remove("s", "a.bin");
          await storage.purgeExpired(T0 + 10 * SECOND);
          expect(await storage.getNode("s", "a.bin")).toBeUndefined();
          const kept = await storage.getVersion("s", "a.bin", first.tag);
          expect(kept).toMatchObject({ blob: first.blob, deleted: false });
          expect((await readAll(storage, kept as VersionRecord)).equals(big)).toBe(true);
          const blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([first.blob]);
        });

        it("the purge removes versions that ended longer ago than keep-versions, raises historyFrom past them, and removes their blobs; a blob a node shares stays", async () => {
          await storage.createStore(keeping("s", "snapshot", "10s"), T0);
          const contents = [0, 1, 2, 3].map(() => randomBytes(inlineLimit * 2));
          const { node: a1 } = await put("s", "a.bin", contents[0] as Uint8Array);
          const { node: a2 } = await put("s", "a.bin", contents[1] as Uint8Array, { now: T0 + SECOND });
          const { node: b1 } = await put("s", "b.bin", contents[2] as Uint8Array);
          const { node: b2 } = await put("s", "b.bin", contents[3] as Uint8Array, { now: T0 + 2 * SECOND });
          // b.bin gets its first contents back: its node and its kept first state share a blob.
          const { node: b3 } = await storage.restoreVersion("s", "b.bin", b1.tag, {}, T0 + 3 * SECOND);
          expect(b3.blob).toBe(b1.blob);
          const before = await store("s");

          expect(await storage.purgeExpired(T0 + 10 * SECOND)).toBe(0);
          // Ended at T0+1s and T0+2s: both gone at T0+12s; b2's state ended at T0+3s stays.
          expect(await storage.purgeExpired(T0 + 12 * SECOND)).toBe(2);
          expect((await versionsOf("s", "a.bin")).map(shown)).toEqual([shown(a2)]);
          expect((await versionsOf("s", "b.bin")).map(shown)).toEqual([shown(b3), shown(b2)]);
          const after = await store("s");
          expect(after.historyFrom).toBeGreaterThanOrEqual(b2.eventId);
          expect(after.historyFrom).toBeLessThanOrEqual(b3.eventId);
          expect(after.lastEventId).toBe(before.lastEventId);
          expect(after.purgedEventId).toBe(before.purgedEventId);
          expect((await readAll(storage, await node("s", "b.bin"))).equals(contents[2] as Uint8Array)).toBe(true);
          await expect(readAll(storage, a1)).rejects.toBeInstanceOf(NotFoundError);
          let blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([a2.blob, b2.blob, b3.blob].sort());

          expect(await storage.purgeExpired(T0 + 13 * SECOND)).toBe(1);
          expect((await store("s")).historyFrom).toBeGreaterThanOrEqual(b3.eventId);
          blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([a2.blob, b3.blob].sort());
          expect(await storage.purgeExpired(T0 + DAY)).toBe(0);
        });

        it("versions of a store whose keep-versions is turned to 0 go at the next purge", async () => {
          await storage.createStore(keeping("s"), T0);
          const { node: first } = await put("s", "a.bin", randomBytes(inlineLimit * 2));
          const { node: second } = await put("s", "a.bin", "two", { now: T0 + SECOND });
          await storage.updateStore(keeping("s", "snapshot", "0"), T0 + 2 * SECOND);
          expect(await storage.getVersion("s", "a.bin", first.tag)).toBeDefined();
          expect(await storage.purgeExpired(T0 + 2 * SECOND)).toBe(1);
          expect(await storage.getVersion("s", "a.bin", first.tag)).toBeUndefined();
          expect((await store("s")).historyFrom).toBeGreaterThanOrEqual(second.eventId);
          const blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([]);
        });

        it("deleteStore removes the store's versions and their blobs", async () => {
          await storage.createStore(keeping("s"), T0);
          await put("s", "a.bin", randomBytes(inlineLimit * 2));
          await put("s", "a.bin", randomBytes(inlineLimit * 2), { now: T0 + SECOND });
          await storage.deleteStore("s", T0 + 2 * SECOND);
          const blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([]);
          await storage.createStore(keeping("s"), T0 + 3 * SECOND);
          expect(await versionsOf("s", "a.bin")).toEqual([]);
        });
      });

      describe("historyFrom", () => {
        it("a new store's horizon is at most its first event; a store created again starts after its old events", async () => {
          const created = await storage.createStore(keeping("s"), T0);
          const root = await node("s", "");
          expect(created.historyFrom).toBeLessThanOrEqual(root.eventId);
          expect(created.historyFrom).toBeGreaterThanOrEqual(0);
          expect((await storage.listStores())[0]?.historyFrom).toBe(created.historyFrom);
          await put("s", "a.txt", "a");
          const old = await store("s");
          await storage.deleteStore("s", T0 + SECOND);
          const revived = await storage.createStore(keeping("s"), T0 + 2 * SECOND);
          expect(revived.historyFrom).toBeGreaterThan(old.lastEventId);
          expect(revived.historyFrom).toBeLessThanOrEqual((await node("s", "")).eventId);
        });

        it("turning keep-versions on sets it to the store's last event, and the states from then on are kept", async () => {
          await storage.createStore(config("s", "snapshot"), T0);
          await put("s", "a.txt", "one");
          const { node: two } = await put("s", "a.txt", "two");
          const before = await store("s");
          const updated = await storage.updateStore(keeping("s"), T0 + SECOND);
          expect(updated.historyFrom).toBe(before.lastEventId);
          expect((await store("s")).historyFrom).toBe(before.lastEventId);
          // Changing other settings of a store that keeps versions leaves the horizon alone.
          await put("s", "a.txt", "three", { now: T0 + 2 * SECOND });
          expect((await storage.updateStore(keeping("s", "snapshot", "60d"), T0 + 3 * SECOND)).historyFrom).toBe(
            before.lastEventId,
          );
          expect((await versionsOf("s", "a.txt")).map((v) => v.md5)).toEqual([md5(text("three")), two.md5]);
          expect(await storage.getNodeAsOf("s", "a.txt", updated.historyFrom)).toMatchObject(shown(two));
        });
      });

      describe("backup snapshots (docs/backup.md, Consistency)", () => {
        async function endedVersions(store: string, upTo: number, batchSize?: number): Promise<VersionRecord[]> {
          const out: VersionRecord[] = [];
          for await (const batch of storage.listEndedVersions(store, upTo, { batchSize })) {
            expect(batch.length).toBeLessThanOrEqual(batchSize ?? Number.POSITIVE_INFINITY);
            out.push(...batch);
          }
          return out;
        }

        it("issue 28: a hold on a store without history keeps its states at the snapshot's event readable, contents and tombstones included, while writes go on and the purge runs; released, the purge lets them go", async () => {
          await storage.createStore(config("s", "snapshot", "1s"), T0);
          const big = randomBytes(inlineLimit * 2);
          await put("s", "a.bin", big);
          await mkdir("s", "d");
          await put("s", "d/b.txt", "b one");
          await put("s", "gone.txt", "x");
          await remove("s", "gone.txt");
          const before = await listAsOf("s", "", (await store("s")).lastEventId, {
            recursive: true,
            includeDeleted: true,
          });

          const hold = await storage.holdSnapshot("s");
          expect(hold?.eventId).toBe((await store("s")).lastEventId);
          const eventId = hold?.eventId as number;
          // Acknowledged after the hold: not in the snapshot.
          await put("s", "a.bin", "replaced", { now: T0 + SECOND });
          await remove("s", "d", { now: T0 + SECOND });
          await put("s", "new.txt", "later", { now: T0 + SECOND });
          expect(await storage.purgeExpired(T0 + DAY)).toBe(0);

          const atSnapshot = await listAsOf("s", "", eventId, { recursive: true, includeDeleted: true });
          expect(atSnapshot.map(shown)).toEqual(before.map(shown));
          const a = atSnapshot.find((n) => n.path === "a.bin") as VersionRecord;
          expect((await readAll(storage, a)).equals(big)).toBe(true);
          const b = atSnapshot.find((n) => n.path === "d/b.txt") as VersionRecord;
          expect((await readAll(storage, b)).toString()).toBe("b one");
          expect(atSnapshot.find((n) => n.path === "gone.txt")?.deleted).toBe(true);
          expect((await storage.getNodeAsOf("s", "", eventId))?.eventId).toBeLessThanOrEqual(eventId);

          expect(await hold?.renew()).toBe(true);
          await hold?.release();
          await storage.purgeExpired(T0 + DAY);
          expect(await endedVersions("s", Number.MAX_SAFE_INTEGER)).toEqual([]);
          expect(await storage.getNodeAsOf("s", "a.bin", eventId)).toBeUndefined();
          const blobs = await blobsNow();
          if (blobs) expect(blobs).toEqual([]);
        });

        it("issue 28: a second hold of a store takes it over: the first one's renew says so (false), its release ends nothing", async () => {
          await storage.createStore(config("s"), T0);
          const first = await storage.holdSnapshot("s");
          const second = await storage.holdSnapshot("s");
          expect(await first?.renew()).toBe(false);
          await first?.release();
          expect(await second?.renew()).toBe(true);
          await second?.release();
          expect(await second?.renew()).toBe(false);
          const third = await storage.holdSnapshot("s");
          expect(await third?.renew()).toBe(true);
          await third?.release();
        });

        it("issue 28: a hold of a store that does not exist, or was deleted, is undefined", async () => {
          expect(await storage.holdSnapshot("nope")).toBeUndefined();
          await storage.createStore(config("s"), T0);
          await storage.deleteStore("s", T0);
          expect(await storage.holdSnapshot("s")).toBeUndefined();
        });

        it("issue 28: listEndedVersions gives the versions ended by an event, in path then event order, in batches", async () => {
          await storage.createStore(keeping("s"), T0);
          const { node: b1 } = await put("s", "b.txt", "b1");
          const { node: a1 } = await put("s", "a.txt", "a1");
          const { node: a2 } = await put("s", "a.txt", "a2");
          const { node: b2 } = await put("s", "b.txt", "b2");
          const upTo = (await store("s")).lastEventId;
          await put("s", "a.txt", "a3");
          await put("s", "b.txt", "b3");
          const ended = await endedVersions("s", upTo, 1);
          expect(ended.map((v) => [v.path, v.tag, v.endedEventId])).toEqual([
            ["a.txt", a1.tag, a2.eventId],
            ["b.txt", b1.tag, b2.eventId],
          ]);
          expect(ended.every((v) => v.inline === null)).toBe(true);
          expect((await readAll(storage, ended[0] as VersionRecord)).toString()).toBe("a1");
          expect((await endedVersions("s", Number.MAX_SAFE_INTEGER)).map((v) => v.tag)).toEqual([
            a1.tag,
            a2.tag,
            b1.tag,
            b2.tag,
          ]);
          // Pages that end at a path's last version, and pages across paths, list the same
          // (the SQLite adapter reads a path's versions, then seeks the next path).
          const key = (vs: VersionRecord[]) => vs.map((v) => `${v.path}@${v.eventId}`);
          const whole = key(await endedVersions("s", Number.MAX_SAFE_INTEGER));
          expect(whole).toHaveLength(4);
          for (const size of [1, 2, 3]) {
            expect(key(await endedVersions("s", Number.MAX_SAFE_INTEGER, size))).toEqual(whole);
          }
        });

        it("issue 28: with contents, listNodesAsOf and listEndedVersions carry each small state's inline contents (none for larger contents, directories and tombstones); without, none", async () => {
          await storage.createStore(keeping("s"), T0);
          await put("s", "a.txt", "a1");
          const big = randomBytes(inlineLimit * 2);
          await put("s", "big.bin", big);
          await mkdir("s", "d");
          await put("s", "d/c.txt", "c1");
          await put("s", "gone.txt", "g1");
          await remove("s", "gone.txt");
          const event = (await store("s")).lastEventId;
          await put("s", "a.txt", "a2");
          await remove("s", "d/c.txt");
          const asOf = async (contents: boolean) => {
            const out: Record<string, string | null> = {};
            const options = { recursive: true, includeDeleted: true, contents, batchSize: 2 };
            for await (const batch of storage.listNodesAsOf("s", "", event, options)) {
              expect(batch.length).toBeLessThanOrEqual(2);
              for (const n of batch) out[n.path] = n.inline && Buffer.from(n.inline).toString();
            }
            return out;
          };
          expect(await asOf(true)).toEqual({
            "a.txt": "a1",
            "big.bin": null,
            d: null,
            "d/c.txt": "c1",
            "gone.txt": null,
          });
          expect(await asOf(false)).toEqual({
            "a.txt": null,
            "big.bin": null,
            d: null,
            "d/c.txt": null,
            "gone.txt": null,
          });
          const ended: Array<[string, string | null]> = [];
          for await (const batch of storage.listEndedVersions("s", Number.MAX_SAFE_INTEGER, { contents: true })) {
            for (const v of batch) {
              if (!v.directory) ended.push([v.path, v.inline && Buffer.from(v.inline).toString()]);
            }
          }
          expect(ended).toEqual([
            ["a.txt", "a1"],
            ["d/c.txt", "c1"],
            ["gone.txt", "g1"],
          ]);
        });
      });
    });
  });
}
