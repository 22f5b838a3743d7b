// Content insights on MongoDB: projects, environments, promotion records and reports (with their
// generation jobs) in collections of their own; report documents inline or in GridFS like
// resource contents. Every change is one single-document write, or an ordered series of them
// that is safe if the process dies between any two (docs/storage.md, docs/mongodb.md).

import type { Collection, Db, Filter, GridFSBucket } from "mongodb";
import { AlreadyExistsError, NotFoundError } from "../../domain/errors.js";
import { INLINE_MAX } from "../local/blob-files.js";
import type {
  BlobInfo,
  EnvironmentRecord,
  InsightsStorage,
  ProjectRecord,
  PromotionRecord,
  ReportJobUpdate,
  ReportRecord,
  ReportStatusValue,
  StorageLogger,
} from "../port.js";
import { silentStorageLogger } from "../port.js";
import {
  binaryBytes,
  guard,
  isConnectionError,
  isDuplicateKey,
  readGridFS,
  removeGridFS,
  unavailable,
} from "./mongo-driver.js";

interface ProjectDoc {
  _id: string;
  account: string;
  name: string;
  store: string;
  created: number;
  creator: string;
}

interface EnvironmentDoc {
  _id: string;
  projectId: string;
  name: string;
  created: number;
  creator: string;
}

/** One per (environment, path): `_id` = "{environmentId}:{path}", so recording is one upsert. */
interface PromotionDoc {
  _id: string;
  environmentId: string;
  path: string;
  date: number;
  by: string;
}

interface DocumentDoc {
  blob: string;
  size: number;
  md5: string;
  inline: Uint8Array | null;
}

interface ReportDoc {
  _id: string;
  projectId: string;
  environmentId: string;
  creator: string;
  created: number;
  additionalFields: string[];
  status: ReportStatusValue;
  finished: number;
  expiresAt: number;
  reason: string;
  attempts: number;
  leaseOwner: string;
  leaseExpires: number;
  document: DocumentDoc | null;
  /** expiresAt plus a grace period, as a Date: what the TTL index (where there is one) reads. */
  expireAt: Date;
  /** The event the report describes; 0: now. Absent from reports stored before it existed (read as 0). */
  asOfEventId?: number;
}

/**
 * The claim of one attempt at a job: `_id` = "{reportId}/{attempt}". Inserting it is what makes
 * a claim exclusive: an insert of an existing `_id` fails atomically on every MongoDB-compatible
 * server, where a conditional update is not atomic on all of them (FerretDB v1 reads, then
 * writes the whole document; docs/mongodb.md).
 */
interface ClaimDoc {
  _id: string;
  report: string;
  attempt: number;
  owner: string;
  /** The lease this claim was made with ends here. */
  expires: number;
}

/**
 * How long after expiresAt the TTL index may remove a report: the purge removes it (and its
 * GridFS document, which the TTL monitor cannot) first; the index is only a backstop.
 */
const TTL_GRACE = 24 * 3_600_000;

/** Reports whose document is in GridFS (larger than INLINE_MAX): what the sweep of orphans asks about. */
const DOCUMENT_IN_GRIDFS = { "document.size": { $gt: INLINE_MAX } };

/** Jobs looked at per query of claimReportJob. */
const CLAIM_CANDIDATES = 16;
const PURGE_BATCH = 1000;

function toProject(d: ProjectDoc): ProjectRecord {
  return { id: d._id, name: d.name, account: d.account, store: d.store, created: d.created, creator: d.creator };
}

function toEnvironment(d: EnvironmentDoc): EnvironmentRecord {
  return { id: d._id, projectId: d.projectId, name: d.name, created: d.created, creator: d.creator };
}

function toReport(d: ReportDoc): ReportRecord {
  return {
    id: d._id,
    projectId: d.projectId,
    environmentId: d.environmentId,
    creator: d.creator,
    created: d.created,
    additionalFields: [...d.additionalFields],
    status: d.status,
    finished: d.finished,
    expiresAt: d.expiresAt,
    reason: d.reason,
    attempts: d.attempts,
    leaseOwner: d.leaseOwner,
    leaseExpires: d.leaseExpires,
    document: d.document && {
      blob: d.document.blob,
      size: d.document.size,
      md5: d.document.md5,
      inline: binaryBytes(d.document.inline),
    },
    // Absent for now (0), as written by a caller that sets none (port.ts).
    ...(d.asOfEventId ? { asOfEventId: d.asOfEventId } : {}),
  };
}

function documentDoc(d: BlobInfo | null): DocumentDoc | null {
  return d && { blob: d.blob, size: d.size, md5: d.md5, inline: d.inline };
}

function expireAt(expiresAt: number): Date {
  return new Date(expiresAt + TTL_GRACE);
}

/** The fields a lease holder may change (ReportJobUpdate), as stored. */
const UPDATABLE = ["status", "finished", "expiresAt", "reason", "leaseExpires", "leaseOwner", "document"] as const;

/** A report's document in the collection. */
function reportDoc(report: ReportRecord): ReportDoc {
  const { id, document, ...fields } = report;
  return {
    _id: id,
    ...fields,
    additionalFields: [...report.additionalFields],
    document: documentDoc(document),
    asOfEventId: report.asOfEventId ?? 0,
    expireAt: expireAt(report.expiresAt),
  };
}

export class MongoInsights implements InsightsStorage {
  private readonly projects: Collection<ProjectDoc>;
  private readonly environments: Collection<EnvironmentDoc>;
  private readonly promotions: Collection<PromotionDoc>;
  private readonly reports: Collection<ReportDoc>;
  private readonly claims: Collection<ClaimDoc>;

  constructor(
    db: Db,
    private readonly bucket: GridFSBucket,
    private readonly log: StorageLogger = silentStorageLogger,
  ) {
    this.projects = db.collection<ProjectDoc>("projects");
    this.environments = db.collection<EnvironmentDoc>("environments");
    this.promotions = db.collection<PromotionDoc>("promotions");
    this.reports = db.collection<ReportDoc>("reports");
    this.claims = db.collection<ClaimDoc>("reportClaims");
  }

  /**
   * The indexes of the insights collections; idempotent, run at each start-up with the others.
   * `partialIndexes`: whether the server has them (FerretDB has not).
   */
  async ensureIndexes(ttlIndex: boolean, partialIndexes: boolean): Promise<void> {
    // Unique indexes make the names unique atomically, on FerretDB too (SQLite unique indexes).
    await this.projects.createIndex({ account: 1, name: 1 }, { unique: true, name: "account_name" });
    await this.environments.createIndex({ projectId: 1, name: 1 }, { unique: true, name: "project_name" });
    await this.promotions.createIndex({ environmentId: 1, path: 1 }, { name: "environment_path" });
    // Claims: equality (status), then the sort (created), then the range (leaseExpires).
    await this.reports.createIndex({ status: 1, created: 1, leaseExpires: 1 }, { name: "jobs" });
    await this.reports.createIndex({ expiresAt: 1 }, { name: "expiry" });
    await this.reports.createIndex({ projectId: 1, environmentId: 1, created: -1 }, { name: "environment" });
    if (ttlIndex) await this.reports.createIndex({ expireAt: 1 }, { expireAfterSeconds: 0, name: "report_ttl" });
    await this.claims.createIndex({ report: 1 }, { name: "report" });
    // For the sweep of orphaned GridFS files: only reports whose document is in GridFS.
    if (partialIndexes)
      await this.reports.createIndex(
        { "document.blob": 1 },
        { name: "document_blob", partialFilterExpression: DOCUMENT_IN_GRIDFS },
      );
  }

  /** The blob UUIDs among `ids` that a report's document is stored under (GridFS documents only). */
  async referencedBlobs(ids: string[]): Promise<string[]> {
    const docs = await this.reports
      .find({ "document.blob": { $in: ids }, ...DOCUMENT_IN_GRIDFS }, { projection: { "document.blob": 1 } })
      .toArray();
    return docs.flatMap((d) => (d.document ? [d.document.blob] : []));
  }

  async createProject(project: ProjectRecord): Promise<ProjectRecord> {
    const { id, ...fields } = project;
    await this.insert(
      () => this.projects.insertOne({ _id: id, ...fields }),
      `project ${project.name} of account ${project.account} already exists`,
    );
    return { ...project };
  }

  async getProject(id: string): Promise<ProjectRecord | undefined> {
    const d = await guard(() => this.projects.findOne({ _id: id }));
    return d ? toProject(d) : undefined;
  }

  async listProjects(): Promise<ProjectRecord[]> {
    const docs = await guard(() => this.projects.find({}).sort({ account: 1, name: 1 }).toArray());
    return docs.map(toProject);
  }

  async createEnvironment(environment: EnvironmentRecord): Promise<EnvironmentRecord> {
    const { id, ...fields } = environment;
    await this.insert(
      () => this.environments.insertOne({ _id: id, ...fields }),
      `environment ${environment.name} of project ${environment.projectId} already exists`,
    );
    return { ...environment };
  }

  async getEnvironment(id: string): Promise<EnvironmentRecord | undefined> {
    const d = await guard(() => this.environments.findOne({ _id: id }));
    return d ? toEnvironment(d) : undefined;
  }

  async listEnvironments(projectId: string): Promise<EnvironmentRecord[]> {
    const docs = await guard(() => this.environments.find({ projectId }).sort({ name: 1 }).toArray());
    return docs.map(toEnvironment);
  }

  async recordPromotion(promotion: PromotionRecord): Promise<void> {
    const { environmentId, path, date, by } = promotion;
    const _id = `${environmentId}:${path}`;
    await guard(async () => {
      try {
        await this.promotions.replaceOne({ _id }, { environmentId, path, date, by }, { upsert: true });
      } catch (err) {
        // Two first promotions of one path raced to insert: the document exists now; replace it.
        if (!isDuplicateKey(err)) throw err;
        await this.promotions.replaceOne({ _id }, { environmentId, path, date, by }, { upsert: true });
      }
    });
  }

  async *listPromotions(environmentId: string): AsyncIterable<PromotionRecord> {
    const cursor = this.promotions
      .find({ environmentId }, { projection: { _id: 0 } })
      .sort({ path: 1 })
      .batchSize(1000);
    try {
      for await (const d of cursor) yield { environmentId: d.environmentId, path: d.path, date: d.date, by: d.by };
    } catch (err) {
      if (isConnectionError(err)) throw unavailable(err);
      throw err;
    } finally {
      await cursor.close().catch(() => {});
    }
  }

  async createReport(report: ReportRecord): Promise<void> {
    await this.insert(() => this.reports.insertOne(reportDoc(report)), `report ${report.id} already exists`);
  }

  /** Writes a report as it is, replacing one with its id (a restore: docs/backup.md). */
  async importReport(report: ReportRecord): Promise<void> {
    await guard(() => this.reports.replaceOne({ _id: report.id }, reportDoc(report), { upsert: true }));
  }

  async getReport(id: string): Promise<ReportRecord | undefined> {
    const d = await guard(() => this.reports.findOne({ _id: id }));
    return d ? toReport(d) : undefined;
  }

  async listReports(projectId: string, environmentId: string): Promise<ReportRecord[]> {
    const docs = await guard(() =>
      this.reports.find({ projectId, environmentId }).sort({ created: -1, _id: -1 }).toArray(),
    );
    return docs.map(toReport);
  }

  /**
   * Oldest claimable job first. For each candidate: insert the claim of its next attempt (only
   * one claimer can), then record the lease on the report with a conditional update. A claimer
   * that dies between the two leaves a claim that no report records; once that claim's lease is
   * over, the next claimer takes the attempt after it.
   */
  async claimReportJob(owner: string, now: number, leaseMs: number): Promise<ReportRecord | undefined> {
    return guard(async () => {
      const tried: string[] = [];
      for (;;) {
        const filter: Filter<ReportDoc> = { status: "generating", leaseExpires: { $lte: now } };
        if (tried.length > 0) filter._id = { $nin: tried };
        const candidates = await this.reports
          .find(filter, { projection: { _id: 1, attempts: 1 } })
          .sort({ created: 1, _id: 1 })
          .limit(CLAIM_CANDIDATES)
          .toArray();
        if (candidates.length === 0) return undefined;
        for (const c of candidates) {
          tried.push(c._id);
          const attempt = await this.claimAttempt(c._id, c.attempts, owner, now + leaseMs, now);
          if (attempt === undefined) continue;
          // Still claimable and not yet at this attempt: else it finished, was purged, or a later
          // claim (made after this one's lease ended) took it.
          const doc = await this.reports.findOneAndUpdate(
            { _id: c._id, status: "generating", leaseExpires: { $lte: now }, attempts: { $lt: attempt } },
            { $set: { leaseOwner: owner, leaseExpires: now + leaseMs, attempts: attempt } },
            { returnDocument: "after" },
          );
          if (doc) return toReport(doc);
        }
      }
    });
  }

  /** Inserts the claim of the first free attempt after `attempts`; undefined when another claimer holds the job. */
  private async claimAttempt(
    report: string,
    attempts: number,
    owner: string,
    expires: number,
    now: number,
  ): Promise<number | undefined> {
    for (let attempt = attempts + 1; ; attempt++) {
      const _id = `${report}/${attempt}`;
      try {
        await this.claims.insertOne({ _id, report, attempt, owner, expires });
        return attempt;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      const taken = await this.claims.findOne({ _id });
      // Held: its claimer may not have recorded it on the report yet. (None: the report was purged.)
      if (!taken || taken.expires > now) return undefined;
      // A claim whose lease is over without the report recording it (its claimer died or lost):
      // that attempt is spent; try the next.
    }
  }

  async updateReportJob(id: string, owner: string, update: ReportJobUpdate): Promise<boolean> {
    // An empty owner would match a job that no one holds.
    if (owner === "") return false;
    const set: Partial<ReportDoc> = {};
    for (const key of UPDATABLE) {
      const value = update[key];
      if (value === undefined) continue;
      if (key === "document") set.document = documentDoc(update.document ?? null);
      else Object.assign(set, { [key]: value });
    }
    if (update.expiresAt !== undefined) set.expireAt = expireAt(update.expiresAt);
    const held = { _id: id, leaseOwner: owner, status: "generating" as const };
    const applied = await guard(async () => {
      if (Object.keys(set).length === 0) return (await this.reports.findOne(held, { projection: { _id: 1 } })) !== null;
      return (await this.reports.updateOne(held, { $set: set })).matchedCount === 1;
    });
    // Not applied, certainly: the document is nobody's (when the update failed, it may be the
    // report's, and is left to the orphan sweep).
    const document = update.document;
    if (!applied && document && document.size > INLINE_MAX) {
      await removeGridFS(this.bucket, document.blob).catch((err: unknown) => {
        this.log.warn(
          { blob: document.blob, err: (err as Error).message },
          "could not remove an unused report document",
        );
      });
    }
    return applied;
  }

  async *readReportDocument(report: ReportRecord): AsyncIterable<Uint8Array> {
    const document = report.document;
    if (!document) throw new NotFoundError(`report ${report.id} has no document`);
    // Read again, not taken from `report`: a purged report's document is gone even when the
    // caller still holds the record (and an inline one would otherwise outlive it).
    const d = await guard(() =>
      this.reports.findOne({ _id: report.id, "document.blob": document.blob }, { projection: { document: 1 } }),
    );
    if (!d?.document) throw new NotFoundError(`the document of report ${report.id} is gone`);
    const inline = binaryBytes(d.document.inline);
    if (inline) {
      yield inline;
      return;
    }
    if (document.size === 0) return;
    yield* readGridFS(this.bucket, document.blob);
  }

  /**
   * Removes the reports whose expiresAt has passed: the records first, then their claims and
   * GridFS documents (a document without its record is only disk; a record without its document
   * would be a report that cannot be read).
   */
  async purgeExpired(now: number): Promise<number> {
    let purged = 0;
    for (;;) {
      const expired = await guard(() =>
        this.reports
          .find({ expiresAt: { $lte: now } }, { projection: { _id: 1, "document.blob": 1, "document.size": 1 } })
          .limit(PURGE_BATCH)
          .toArray(),
      );
      if (expired.length === 0) return purged;
      const ids = expired.map((d) => d._id);
      const res = await guard(() => this.reports.deleteMany({ _id: { $in: ids }, expiresAt: { $lte: now } }));
      purged += res.deletedCount;
      let gone = expired;
      if (res.deletedCount < expired.length) {
        // Some changed in between (a job finished and moved its expiry): keep what they reference.
        const left = await guard(() => this.reports.find({ _id: { $in: ids } }, { projection: { _id: 1 } }).toArray());
        const kept = new Set(left.map((d) => d._id));
        gone = expired.filter((d) => !kept.has(d._id));
      }
      await guard(() => this.claims.deleteMany({ report: { $in: gone.map((d) => d._id) } }));
      for (const d of gone) {
        const blob = d.document?.blob;
        if (blob && (d.document?.size ?? 0) > INLINE_MAX) await guard(() => removeGridFS(this.bucket, blob));
      }
      if (expired.length < PURGE_BATCH) return purged;
    }
  }

  private async insert(write: () => Promise<unknown>, already: string): Promise<void> {
    await guard(async () => {
      try {
        await write();
      } catch (err) {
        if (isDuplicateKey(err)) throw new AlreadyExistsError(already);
        throw err;
      }
    });
  }
}
