// A backup of everything a server keeps, read through the storage port and written as the parts of
// an archive (docs/backup.md, "The parts"): each store held at its snapshot event, its states then
// and its ended versions, the contents they point at (each blob once), then the insights records.

import { setImmediate as nextTurn } from "node:timers/promises";
import { UnavailableError } from "../domain/errors.js";
import { giveBack } from "../storage/chunk-pool.js";
import { INLINE_MAX } from "../storage/local/blob-files.js";
import type { NodeRecord, StoragePort } from "../storage/port.js";
import type { ArchivePart } from "./archive.js";
import { lineOfNode, lineOfReport, lineOfVersion } from "./lines.js";

/** A JSON Lines part is cut when it reaches this many bytes, or LINES_PER_PART lines. */
const PART_BYTES = 1024 * 1024;
const LINES_PER_PART = 1000;

/** What a store's `store.json` holds. */
export interface StorePart {
  name: string;
  type: string;
  settings: Record<string, string>;
  created: number;
  modified: number;
  /** The store's snapshot event id: its last event in the archive, and on a restored server. */
  lastEventId: number;
  purgedEventId: number;
  historyFrom: number;
  /** A filesystem store's contents are its folder's files: not in the archive (docs/backup.md). */
  contents: "archive" | "folder";
}

/**
 * Contents up to this size travel in their record's line (`inline`, base64), as both backends keep
 * them with the metadata; larger ones as `blobs/{uuid}` entries, each once.
 */
export const LINE_CONTENTS_MAX = INLINE_MAX;
/**
 * States read per batch, with their inline contents (ListOptions.contents): at most
 * STATES_PER_BATCH * INLINE_MAX = 16 MiB of contents held at once, whatever the store's size.
 */
const STATES_PER_BATCH = 256;

export interface StoreSummary {
  name: string;
  /** The part prefix of the store: `stores/0001`. */
  part: string;
  snapshotEventId: number;
  nodes: number;
  versions: number;
}

/** The manifest's `contents`. */
export interface BackupContents {
  stores: StoreSummary[];
  counts: {
    stores: number;
    nodes: number;
    versions: number;
    blobs: number;
    blobBytes: number;
    projects: number;
    environments: number;
    promotions: number;
    reports: number;
  };
  /** Whether secrets are in the archive (`secrets/*`): only with --include-secrets. */
  secrets: boolean;
}

export interface BackupOptions {
  /** Parts of secrets to add at the end (the development issuer's key file), already read. */
  secrets?: ArchivePart[];
}

/**
 * The parts of a backup of `storage`, and `describe()` for the manifest once they are all written.
 * Memory: one page of records and one JSON part at a time, and the ids of the blobs written.
 */
export function backupParts(
  storage: StoragePort,
  options: BackupOptions = {},
): { parts: AsyncIterable<ArchivePart>; describe(): BackupContents } {
  const contents: BackupContents = {
    stores: [],
    counts: {
      stores: 0,
      nodes: 0,
      versions: 0,
      blobs: 0,
      blobBytes: 0,
      projects: 0,
      environments: 0,
      promotions: 0,
      reports: 0,
    },
    secrets: (options.secrets?.length ?? 0) > 0,
  };
  const written = new Set<string>();

  /** The contents of a state too large for its line, unless written already. */
  async function* blobOf(state: NodeRecord): AsyncIterable<ArchivePart> {
    if (!hasContents(state) || state.size <= LINE_CONTENTS_MAX || written.has(state.blob)) return;
    written.add(state.blob);
    contents.counts.blobs += 1;
    contents.counts.blobBytes += state.size;
    yield { name: `blobs/${state.blob}`, size: state.size, body: storage.readBlob(state) };
  }

  async function* parts(): AsyncIterable<ArchivePart> {
    const stores = await storage.listStores();
    for (const [i, store] of stores.entries()) {
      const name = store.config.name;
      const prefix = `stores/${String(i + 1).padStart(4, "0")}`;
      const folder = store.config.type === "filesystem";
      const hold = await storage.holdSnapshot(name);
      if (!hold) continue; // deleted since it was listed
      try {
        const held = (await storage.getStore(name)) ?? store;
        const part: StorePart = {
          name,
          type: held.config.type,
          settings: held.config.settings,
          created: held.created,
          modified: held.modified,
          lastEventId: hold.eventId,
          purgedEventId: Math.min(held.purgedEventId, hold.eventId),
          historyFrom: Math.min(held.historyFrom, hold.eventId),
          contents: folder ? "folder" : "archive",
        };
        yield jsonPart(`${prefix}/store.json`, part);
        const summary: StoreSummary = { name, part: prefix, snapshotEventId: hold.eventId, nodes: 0, versions: 0 };
        contents.stores.push(summary);
        contents.counts.stores += 1;
        const root = await storage.getNodeAsOf(name, "", hold.eventId);
        const states = withFirst(
          root ? [root] : [],
          storage.listNodesAsOf(name, "", hold.eventId, {
            recursive: true,
            includeDeleted: true,
            contents: !folder,
            batchSize: STATES_PER_BATCH,
          }),
        );
        let renewed = Date.now();
        const renew = async (now = false) => {
          if (!now && Date.now() - renewed < 60_000) return;
          renewed = Date.now();
          // Another backup took the hold: it may end it before this one is done, and the purge
          // then take states this one still reads. Refused rather than an archive that may lack them.
          if (!(await hold.renew())) {
            throw new UnavailableError(
              `store ${name}: another backup took its snapshot hold while this one read it, so this archive could miss states the purge then removed; run one backup at a time`,
            );
          }
        };
        yield* linesWithBlobs(`${prefix}/nodes`, states, folder, lineOfNode, (n) => {
          summary.nodes += n;
          contents.counts.nodes += n;
          return renew();
        });
        yield* linesWithBlobs(
          `${prefix}/versions`,
          storage.listEndedVersions(name, hold.eventId, { contents: !folder, batchSize: STATES_PER_BATCH }),
          folder,
          lineOfVersion,
          (n) => {
            summary.versions += n;
            contents.counts.versions += n;
            return renew();
          },
        );
        // The hold was this backup's to the end: every state it read was kept.
        await renew(true);
      } finally {
        await hold.release();
      }
    }
    yield* insightsParts();
    for (const secret of options.secrets ?? []) yield secret;
  }

  /** JSON Lines parts of records, each preceded by the blobs its records point at and not yet written. */
  async function* linesWithBlobs<T extends NodeRecord>(
    prefix: string,
    batches: AsyncIterable<T[]>,
    folder: boolean,
    line: (r: T) => object,
    counted: (n: number) => Promise<void>,
  ): AsyncIterable<ArchivePart> {
    const lines = new JsonLines(prefix);
    for await (const batch of batches) {
      for (const record of batch) {
        // The blobs go before the part that refers to them: a restore stores contents first.
        if (!folder) yield* blobOf(record);
        const small = !folder && hasContents(record) && record.size <= LINE_CONTENTS_MAX;
        // Inline contents come with the listing; others this small (a backend that kept them in a
        // file) are read.
        const inline = !small
          ? undefined
          : record.inline
            ? base64(record.inline)
            : await base64Of(storage.readBlob(record));
        const full = lines.add(line(record), inline);
        if (full) yield full;
      }
      await counted(batch.length);
      // The next batch after the requests that came meanwhile (a backup over --url runs in the
      // server): a batch is read and encoded synchronously, and the awaits between batches
      // resolve at once, so without this the loop would not turn until the output pushed back.
      await nextTurn();
    }
    const last = lines.flush();
    if (last) yield last;
  }

  async function* insightsParts(): AsyncIterable<ArchivePart> {
    const projects = await storage.insights.listProjects();
    const projectLines = new JsonLines("insights/projects");
    const environmentLines = new JsonLines("insights/environments");
    const promotionLines = new JsonLines("insights/promotions");
    const reportLines = new JsonLines("insights/reports");
    for (const project of projects) {
      contents.counts.projects += 1;
      const p = projectLines.add(project);
      if (p) yield p;
    }
    const last = projectLines.flush();
    if (last) yield last;
    for (const project of projects) {
      for (const environment of await storage.insights.listEnvironments(project.id)) {
        contents.counts.environments += 1;
        const e = environmentLines.add(environment);
        if (e) yield e;
        for await (const promotion of storage.insights.listPromotions(environment.id)) {
          contents.counts.promotions += 1;
          const p = promotionLines.add(promotion);
          if (p) yield p;
        }
        for (const report of await storage.insights.listReports(project.id, environment.id)) {
          contents.counts.reports += 1;
          const document = report.document;
          const small = document !== null && document.size <= LINE_CONTENTS_MAX;
          if (document && !small && !written.has(document.blob)) {
            written.add(document.blob);
            contents.counts.blobs += 1;
            contents.counts.blobBytes += document.size;
            yield {
              name: `blobs/${document.blob}`,
              size: document.size,
              body: storage.insights.readReportDocument(report),
            };
          }
          const inline = small ? await base64Of(storage.insights.readReportDocument(report)) : undefined;
          const r = reportLines.add(lineOfReport(report, inline));
          if (r) yield r;
        }
      }
    }
    for (const lines of [environmentLines, promotionLines, reportLines]) {
      const rest = lines.flush();
      if (rest) yield rest;
    }
  }

  return { parts: parts(), describe: () => contents };
}

/**
 * Bytes gathered into chunks of up to `size` (larger only for a single piece larger than it): one
 * write or one message per chunk instead of one per tar header. The pieces the storage lent (storage/chunk-pool.ts) go
 * back once copied.
 */
export async function* gathered(pieces: AsyncIterable<Uint8Array>, size = 1024 * 1024): AsyncGenerator<Uint8Array> {
  let held: Uint8Array[] = [];
  let bytes = 0;
  const flush = () => {
    const chunk = Buffer.concat(held);
    for (const p of held) giveBack(p);
    held = [];
    bytes = 0;
    return chunk;
  };
  for await (const piece of pieces) {
    if (bytes > 0 && bytes + piece.byteLength > size) yield flush();
    if (piece.byteLength >= size) {
      // A whole chunk already (a JSON part): passed on as it is, not copied; never given back.
      yield piece;
      continue;
    }
    held.push(piece);
    bytes += piece.byteLength;
    if (bytes >= size) yield flush();
  }
  if (bytes > 0) yield Buffer.concat(held);
}

/** `first`, then the batches of `rest`. */
async function* withFirst<T>(first: T[], rest: AsyncIterable<T[]>): AsyncIterable<T[]> {
  if (first.length > 0) yield first;
  yield* rest;
}

function hasContents(n: NodeRecord): boolean {
  return !n.directory && !n.deleted && n.blob !== "";
}

async function base64Of(chunks: AsyncIterable<Uint8Array>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts).toString("base64");
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

export function jsonPart(name: string, value: unknown): ArchivePart {
  const body = Buffer.from(`${JSON.stringify(value)}\n`, "utf8");
  return { name, size: body.byteLength, body };
}

/** Lines gathered into numbered parts `{prefix}-000001.jsonl`, each at most PART_BYTES (or one line). */
class JsonLines {
  // Strings until the part is cut: one encoding and one buffer per part, not per line.
  private lines: string[] = [];
  private bytes = 0;
  private count = 0;

  constructor(private readonly prefix: string) {}

  /**
   * Adds a line: `value`, and `inline` as its last member when given (base64 needs no escaping:
   * appended as it is, rather than scanned again by JSON.stringify, most of a small resource's
   * line). Returns the part it completes, if it does.
   */
  add(value: object, inline?: string): ArchivePart | undefined {
    const json = JSON.stringify(value);
    const line = inline === undefined ? `${json}\n` : `${json.slice(0, -1)},"inline":"${inline}"}\n`;
    const size = Buffer.byteLength(line, "utf8");
    const cut = this.bytes + size > PART_BYTES ? this.flush() : undefined;
    this.lines.push(line);
    this.bytes += size;
    return cut ?? (this.lines.length >= LINES_PER_PART ? this.flush() : undefined);
  }

  flush(): ArchivePart | undefined {
    if (this.lines.length === 0) return undefined;
    this.count += 1;
    const body = Buffer.from(this.lines.join(""), "utf8");
    this.lines = [];
    this.bytes = 0;
    return { name: `${this.prefix}-${String(this.count).padStart(6, "0")}.jsonl`, size: body.byteLength, body };
  }
}
