// A restore of an archive into an empty backend through the storage port (docs/backup.md,
// "Restore"): the parts written as they are read and checked, the target marked as being restored
// until the manifest has been checked, so that a restore cut short is never taken for a finished
// one, and running it again finishes it.

import { AlreadyExistsError } from "../domain/errors.js";
import type { StoreType } from "../domain/store.js";
import type { EnvironmentRecord, ProjectRecord, PromotionRecord, StoragePort } from "../storage/port.js";
import { ArchiveError, ArchiveReader, type Manifest, type ReadPart } from "./archive.js";
import type { BackupContents, StorePart } from "./backup.js";
import { type NodeLine, type ReportLine, reportOfLine, stateOfLine, type VersionLine } from "./lines.js";

/** The target cannot take this archive (not empty, or being restored from another one). */
export class RestoreRefusedError extends Error {
  override name = "RestoreRefusedError";
}

export interface RestoreOptions {
  /** Called with the bytes of the archive read so far, after each part. */
  progress?(bytesRead: number): void;
  /** A `secrets/*` part of the archive (docs/backup.md): where the caller keeps it; skipped when absent. */
  secret?(name: string, body: Uint8Array): Promise<void>;
}

/** The largest JSON Lines part the restore reads whole (the writer cuts them at 1 MiB plus one line). */
const MAX_LINES_PART = 64 * 1024 * 1024;

/**
 * Restores the archive `source` into `storage`, which must be empty or being restored from the same
 * archive (a re-run). Resolves with the checked manifest; throws ArchiveError (the archive is bad:
 * the target stays marked as being restored) or RestoreRefusedError (nothing was written).
 */
export async function restoreArchive(
  storage: StoragePort,
  source: AsyncIterable<Uint8Array>,
  options: RestoreOptions = {},
): Promise<Manifest<BackupContents>> {
  const target = await storage.restoreTarget();
  if (target.state === "used") {
    throw new RestoreRefusedError(`the target is not empty: ${target.reason}; a restore goes into an empty one`);
  }
  const reader = new ArchiveReader<BackupContents>(source);
  const stores = new Map<string, string>();
  let begun = false;
  for await (const part of reader.parts()) {
    if (!begun) {
      const kind = reader.kind;
      const id = `${kind?.created}/${kind?.troveVersion}`;
      if (target.state === "restoring" && target.archive !== id) {
        throw new RestoreRefusedError(
          `the target is being restored from another archive (${target.archive}): finish that restore, or start again with an empty target`,
        );
      }
      await storage.beginRestore(id);
      begun = true;
    }
    await restorePart(storage, part, stores, options);
    options.progress?.(reader.offset);
  }
  const manifest = reader.manifest as Manifest<BackupContents>;
  if (!begun) await storage.beginRestore(`${manifest.created}/${manifest.troveVersion}`);
  await storage.finishRestore();
  return manifest;
}

async function restorePart(
  storage: StoragePort,
  part: ReadPart,
  stores: Map<string, string>,
  options: RestoreOptions,
): Promise<void> {
  const name = part.name;
  if (name.startsWith("blobs/")) {
    const blob = name.slice("blobs/".length);
    await storage.writeBlob(part.body, { maxSize: Number.MAX_SAFE_INTEGER, blob });
    return;
  }
  if (name.startsWith("secrets/")) {
    const body = await whole(part);
    await options.secret?.(name, body);
    return;
  }
  const store = /^(stores\/\d{4})\/(store\.json|nodes-\d{6}\.jsonl|versions-\d{6}\.jsonl)$/.exec(name);
  if (store) {
    const prefix = store[1] as string;
    if (store[2] === "store.json") {
      const s = parseJson<StorePart>(name, await whole(part));
      stores.set(prefix, s.name);
      await storage.importStore({
        config: { name: s.name, type: s.type as StoreType, settings: s.settings },
        deleted: false,
        lastEventId: s.lastEventId,
        purgedEventId: s.purgedEventId,
        historyFrom: s.historyFrom,
        created: s.created,
        modified: s.modified,
        rootTag: "",
      });
      return;
    }
    const storeName = stores.get(prefix);
    if (storeName === undefined) throw new ArchiveError(name, `${name} comes before ${prefix}/store.json`);
    if (store[2]?.startsWith("nodes-")) {
      const lines = await linesOf<NodeLine>(part);
      await storage.importNodes(
        storeName,
        lines.map((l) => stateOfLine(storeName, l)),
      );
    } else {
      const lines = await linesOf<VersionLine>(part);
      await storage.importVersions(
        storeName,
        lines.map((l) => stateOfLine(storeName, l)),
      );
    }
    return;
  }
  const insights = /^insights\/(projects|environments|promotions|reports)-\d{6}\.jsonl$/.exec(name);
  if (!insights) throw new ArchiveError(name, `${name} is not a part this Trove knows`);
  const kind = insights[1];
  if (kind === "projects") {
    for (const p of await linesOf<ProjectRecord>(part)) await already(() => storage.insights.createProject(p));
  } else if (kind === "environments") {
    for (const e of await linesOf<EnvironmentRecord>(part)) await already(() => storage.insights.createEnvironment(e));
  } else if (kind === "promotions") {
    for (const p of await linesOf<PromotionRecord>(part)) await storage.insights.recordPromotion(p);
  } else {
    for (const r of await linesOf<ReportLine>(part)) await storage.importReport(reportOfLine(r));
  }
}

/** A write that a re-run finds made already. */
async function already(write: () => Promise<unknown>): Promise<void> {
  try {
    await write();
  } catch (err) {
    if (!(err instanceof AlreadyExistsError)) throw err;
  }
}

async function whole(part: ReadPart): Promise<Buffer> {
  if (part.size > MAX_LINES_PART)
    throw new ArchiveError(part.name, `${part.name} is larger than ${MAX_LINES_PART} bytes`);
  const chunks: Buffer[] = [];
  for await (const chunk of part.body) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

function parseJson<T>(name: string, bytes: Uint8Array): T {
  try {
    return JSON.parse(Buffer.from(bytes).toString("utf8")) as T;
  } catch {
    throw new ArchiveError(name, `${name} is not valid JSON: the archive is damaged`);
  }
}

async function linesOf<T>(part: ReadPart): Promise<T[]> {
  const text = (await whole(part)).toString("utf8");
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => parseJson<T>(part.name, Buffer.from(l)));
}
