// Content insights on the embedded backend: projects, environments, promotion records and
// reports (with their generation jobs) in SQLite tables beside the nodes; report documents
// inline or as blob files, like resource contents (docs/storage.md). Every write goes through
// the adapter's SqliteWrites, so a full disk is InsufficientStorageError here too.

import type Database from "better-sqlite3";
import { AlreadyExistsError, NotFoundError } from "../../domain/errors.js";
import type { BlobFiles } from "../local/blob-files.js";
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
import type { SqliteWrites } from "./sqlite-errors.js";

// Created at every open, like the tables of the nodes: a data directory made by a version
// without insights gains the tables and opens as before.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS projects (
  id TEXT PRIMARY KEY,
  account TEXT NOT NULL,
  name TEXT NOT NULL,
  store TEXT NOT NULL,
  created INTEGER NOT NULL,
  creator TEXT NOT NULL,
  UNIQUE (account, name)
);
CREATE TABLE IF NOT EXISTS environments (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  name TEXT NOT NULL,
  created INTEGER NOT NULL,
  creator TEXT NOT NULL,
  UNIQUE (project_id, name)
);
CREATE TABLE IF NOT EXISTS promotions (
  environment_id TEXT NOT NULL,
  path TEXT NOT NULL,
  date INTEGER NOT NULL,
  promoted_by TEXT NOT NULL,
  PRIMARY KEY (environment_id, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS reports (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  environment_id TEXT NOT NULL,
  creator TEXT NOT NULL,
  created INTEGER NOT NULL,
  additional_fields TEXT NOT NULL,
  status TEXT NOT NULL,
  finished INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  reason TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  lease_owner TEXT NOT NULL,
  lease_expires INTEGER NOT NULL,
  document_blob TEXT,
  document_size INTEGER,
  document_md5 TEXT,
  document_inline BLOB,
  as_of_event_id INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS reports_jobs ON reports (created, id, lease_expires) WHERE status = 'generating';
CREATE INDEX IF NOT EXISTS reports_expiry ON reports (expires_at);
CREATE INDEX IF NOT EXISTS reports_environment ON reports (project_id, environment_id, created);
`;

interface ProjectRow {
  id: string;
  account: string;
  name: string;
  store: string;
  created: number;
  creator: string;
}

interface EnvironmentRow {
  id: string;
  project_id: string;
  name: string;
  created: number;
  creator: string;
}

interface PromotionRow {
  environment_id: string;
  path: string;
  date: number;
  promoted_by: string;
}

interface ReportRow {
  id: string;
  project_id: string;
  environment_id: string;
  creator: string;
  created: number;
  additional_fields: string;
  status: string;
  finished: number;
  expires_at: number;
  reason: string;
  attempts: number;
  lease_owner: string;
  lease_expires: number;
  document_blob: string | null;
  document_size: number | null;
  document_md5: string | null;
  document_inline: Buffer | null;
  as_of_event_id: number;
}

function toEnvironment(r: EnvironmentRow): EnvironmentRecord {
  return { id: r.id, projectId: r.project_id, name: r.name, created: r.created, creator: r.creator };
}

function toPromotion(r: PromotionRow): PromotionRecord {
  return { environmentId: r.environment_id, path: r.path, date: r.date, by: r.promoted_by };
}

function toReport(r: ReportRow): ReportRecord {
  return {
    id: r.id,
    projectId: r.project_id,
    environmentId: r.environment_id,
    creator: r.creator,
    created: r.created,
    additionalFields: JSON.parse(r.additional_fields) as string[],
    status: r.status as ReportStatusValue,
    finished: r.finished,
    expiresAt: r.expires_at,
    reason: r.reason,
    attempts: r.attempts,
    leaseOwner: r.lease_owner,
    leaseExpires: r.lease_expires,
    document:
      r.document_blob === null
        ? null
        : {
            blob: r.document_blob,
            size: r.document_size ?? 0,
            md5: r.document_md5 ?? "",
            inline: r.document_inline,
          },
    // Absent for now (0), as written by a caller that sets none (port.ts).
    ...(r.as_of_event_id !== 0 ? { asOfEventId: r.as_of_event_id } : {}),
  };
}

/** The document columns of a report (all null when it has none). */
/** A report's REPORT_VALUES parameters. */
function reportParams(report: ReportRecord) {
  return {
    ...report,
    additionalFields: JSON.stringify(report.additionalFields),
    ...documentParams(report.document),
    asOfEventId: report.asOfEventId ?? 0,
  };
}

function documentParams(d: BlobInfo | null) {
  return {
    document_blob: d?.blob ?? null,
    document_size: d?.size ?? null,
    document_md5: d?.md5 ?? null,
    document_inline: d?.inline ?? null,
  };
}

/** The column of each field a lease holder may change (ReportJobUpdate); document is four. */
const UPDATE_COLUMNS = {
  status: "status",
  finished: "finished",
  expiresAt: "expires_at",
  reason: "reason",
  leaseExpires: "lease_expires",
  leaseOwner: "lease_owner",
} as const satisfies Record<Exclude<keyof ReportJobUpdate, "document">, string>;

function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}

const PAGE = 1000;

/** A report row's columns and their named parameters (ReportRecord with documentParams). */
const REPORT_VALUES = `INTO reports (id, project_id, environment_id, creator, created, additional_fields, status, finished,
           expires_at, reason, attempts, lease_owner, lease_expires, document_blob, document_size, document_md5, document_inline,
           as_of_event_id)
         VALUES (@id, @projectId, @environmentId, @creator, @created, @additionalFields, @status, @finished,
           @expiresAt, @reason, @attempts, @leaseOwner, @leaseExpires, @document_blob, @document_size, @document_md5, @document_inline,
           @asOfEventId)`;

/**
 * The columns added to `reports` since its first version, each with the default an older row
 * reads as: a data directory made before them gains them at open (ALTER TABLE ADD COLUMN with a
 * constant default rewrites nothing).
 */
const ADDED_REPORT_COLUMNS = { as_of_event_id: "INTEGER NOT NULL DEFAULT 0" } as const;

function addReportColumns(db: Database.Database): void {
  const present = new Set(db.prepare<[], string>("SELECT name FROM pragma_table_info('reports')").pluck().all());
  for (const [column, definition] of Object.entries(ADDED_REPORT_COLUMNS)) {
    if (present.has(column)) continue;
    try {
      db.exec(`ALTER TABLE reports ADD COLUMN ${column} ${definition}`);
    } catch (err) {
      // Another process on the same data directory (trove serve --workers) added it first.
      if (!/duplicate column name/i.test((err as Error).message)) throw err;
    }
  }
}

export class SqliteInsights implements InsightsStorage {
  private readonly stmt;
  private readonly claim;
  /** updateReportJob statements by the set of fields updated (a handful of shapes in practice). */
  private readonly updates = new Map<string, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    private readonly blobs: BlobFiles,
    private readonly writes: SqliteWrites,
    private readonly logger: StorageLogger,
  ) {
    db.exec(SCHEMA);
    addReportColumns(db);
    this.stmt = {
      insertProject: db.prepare(
        "INSERT INTO projects (id, account, name, store, created, creator) VALUES (@id, @account, @name, @store, @created, @creator)",
      ),
      getProject: db.prepare<[string], ProjectRow>("SELECT * FROM projects WHERE id = ?"),
      listProjects: db.prepare<[], ProjectRow>("SELECT * FROM projects ORDER BY account, name"),
      insertEnvironment: db.prepare(
        "INSERT INTO environments (id, project_id, name, created, creator) VALUES (@id, @projectId, @name, @created, @creator)",
      ),
      getEnvironment: db.prepare<[string], EnvironmentRow>("SELECT * FROM environments WHERE id = ?"),
      listEnvironments: db.prepare<[string], EnvironmentRow>(
        "SELECT * FROM environments WHERE project_id = ? ORDER BY name",
      ),
      upsertPromotion: db.prepare(
        `INSERT INTO promotions (environment_id, path, date, promoted_by) VALUES (@environmentId, @path, @date, @by)
         ON CONFLICT (environment_id, path) DO UPDATE SET date = excluded.date, promoted_by = excluded.promoted_by`,
      ),
      promotionsPage: db.prepare<[string, string, number], PromotionRow>(
        "SELECT * FROM promotions WHERE environment_id = ? AND path > ? ORDER BY path LIMIT ?",
      ),
      insertReport: db.prepare(`INSERT ${REPORT_VALUES}`),
      // A restore's (docs/backup.md): the report as the archive has it, written again by a re-run.
      importReport: db.prepare(`INSERT OR REPLACE ${REPORT_VALUES}`),
      getReport: db.prepare<[string], ReportRow>("SELECT * FROM reports WHERE id = ?"),
      listReports: db.prepare<[string, string], ReportRow>(
        "SELECT * FROM reports WHERE project_id = ? AND environment_id = ? ORDER BY created DESC, id DESC",
      ),
      // One statement: choosing the job and taking it cannot be told apart by another writer.
      claimJob: db.prepare<[string, number, number], ReportRow>(
        `UPDATE reports SET lease_owner = ?, lease_expires = ?, attempts = attempts + 1
         WHERE id = (SELECT id FROM reports WHERE status = 'generating' AND lease_expires <= ? ORDER BY created, id LIMIT 1)
         RETURNING *`,
      ),
      documentOf: db
        .prepare<[string, string], unknown[]>("SELECT document_inline FROM reports WHERE id = ? AND document_blob = ?")
        .raw(true),
      documentInUse: db.prepare<[string], { n: number }>("SELECT 1 AS n FROM reports WHERE document_blob = ? LIMIT 1"),
      documentFiles: db
        .prepare<[], string>(
          "SELECT document_blob FROM reports WHERE document_blob IS NOT NULL AND document_inline IS NULL",
        )
        .pluck(),
      purgeReports: db.prepare<[number, number], { blob: string | null; inlined: number }>(
        `DELETE FROM reports WHERE id IN (SELECT id FROM reports WHERE expires_at <= ? LIMIT ?)
         RETURNING document_blob AS blob, document_inline IS NOT NULL AS inlined`,
      ),
    };
    // BEGIN IMMEDIATE, as every write of the adapter: the write lock is taken before the choice is made.
    this.claim = db.transaction((owner: string, now: number, leaseMs: number) =>
      this.stmt.claimJob.get(owner, now + leaseMs, now),
    ).immediate;
  }

  async createProject(project: ProjectRecord): Promise<ProjectRecord> {
    try {
      await this.writes.write(() => this.stmt.insertProject.run(project));
    } catch (err) {
      if (isUniqueViolation(err))
        throw new AlreadyExistsError(`project ${project.name} of account ${project.account} already exists`);
      throw err;
    }
    return { ...project };
  }

  async getProject(id: string): Promise<ProjectRecord | undefined> {
    const row = this.stmt.getProject.get(id);
    return row && { ...row };
  }

  async listProjects(): Promise<ProjectRecord[]> {
    return this.stmt.listProjects.all().map((row) => ({ ...row }));
  }

  async createEnvironment(environment: EnvironmentRecord): Promise<EnvironmentRecord> {
    try {
      await this.writes.write(() => this.stmt.insertEnvironment.run(environment));
    } catch (err) {
      if (isUniqueViolation(err))
        throw new AlreadyExistsError(
          `environment ${environment.name} of project ${environment.projectId} already exists`,
        );
      throw err;
    }
    return { ...environment };
  }

  async getEnvironment(id: string): Promise<EnvironmentRecord | undefined> {
    const row = this.stmt.getEnvironment.get(id);
    return row && toEnvironment(row);
  }

  async listEnvironments(projectId: string): Promise<EnvironmentRecord[]> {
    return this.stmt.listEnvironments.all(projectId).map(toEnvironment);
  }

  async recordPromotion(promotion: PromotionRecord): Promise<void> {
    await this.writes.write(() => this.stmt.upsertPromotion.run(promotion));
  }

  // Keyset pages: a better-sqlite3 cursor cannot stay open across the consumer's awaits.
  async *listPromotions(environmentId: string): AsyncIterable<PromotionRecord> {
    for (let after = ""; ; ) {
      const rows = this.stmt.promotionsPage.all(environmentId, after, PAGE);
      for (const row of rows) yield toPromotion(row);
      const last = rows.at(-1);
      if (!last || rows.length < PAGE) return;
      after = last.path;
    }
  }

  /** Writes a report as it is, replacing one with its id (a restore: docs/backup.md). */
  async importReport(report: ReportRecord): Promise<void> {
    await this.writes.write(() => this.stmt.importReport.run(reportParams(report)));
  }

  async createReport(report: ReportRecord): Promise<void> {
    try {
      await this.writes.write(() => this.stmt.insertReport.run(reportParams(report)));
    } catch (err) {
      if (isUniqueViolation(err)) throw new AlreadyExistsError(`report ${report.id} already exists`);
      throw err;
    }
  }

  async getReport(id: string): Promise<ReportRecord | undefined> {
    const row = this.stmt.getReport.get(id);
    return row && toReport(row);
  }

  async listReports(projectId: string, environmentId: string): Promise<ReportRecord[]> {
    return this.stmt.listReports.all(projectId, environmentId).map(toReport);
  }

  async claimReportJob(owner: string, now: number, leaseMs: number): Promise<ReportRecord | undefined> {
    const row = await this.writes.write(() => this.claim(owner, now, leaseMs));
    return row && toReport(row);
  }

  async updateReportJob(id: string, owner: string, update: ReportJobUpdate): Promise<boolean> {
    const document = update.document;
    let applied: boolean;
    try {
      applied = await this.applyReportJobUpdate(id, owner, update);
    } catch (err) {
      // One statement, rolled back: a document handed over is ours to discard (port.ts).
      if (document) await this.discardDocument(document);
      throw err;
    }
    if (!applied && document) await this.discardDocument(document);
    return applied;
  }

  private async applyReportJobUpdate(id: string, owner: string, update: ReportJobUpdate): Promise<boolean> {
    // An empty owner would match a job that no one holds.
    if (owner === "") return false;
    const fields = (Object.keys(update) as Array<keyof ReportJobUpdate>)
      .filter((k) => update[k] !== undefined && (k === "document" || k in UPDATE_COLUMNS))
      .sort();
    if (fields.length === 0) {
      const row = this.stmt.getReport.get(id);
      return row?.lease_owner === owner && row.status === "generating";
    }
    const params: Record<string, unknown> = { id, owner };
    for (const k of fields) {
      if (k === "document") Object.assign(params, documentParams(update.document ?? null));
      else params[k] = update[k];
    }
    return (await this.writes.write(() => this.updateStatement(fields).run(params))).changes === 1;
  }

  /** Removes the file of a document no report refers to; never throws (the orphan sweep is the floor). */
  private async discardDocument(document: BlobInfo): Promise<void> {
    if (document.inline) return;
    try {
      if (this.stmt.documentInUse.get(document.blob)) return;
      await this.blobs.remove(document.blob);
    } catch (err) {
      this.logger.warn({ err, blob: document.blob }, "could not remove a report document; the orphan sweep will");
    }
  }

  private updateStatement(fields: ReadonlyArray<keyof ReportJobUpdate>): Database.Statement {
    const key = fields.join(",");
    let statement = this.updates.get(key);
    if (!statement) {
      const sets = fields.flatMap((k) =>
        k === "document"
          ? Object.keys(documentParams(null)).map((c) => `${c} = @${c}`)
          : [`${UPDATE_COLUMNS[k]} = @${k}`],
      );
      statement = this.db.prepare(
        `UPDATE reports SET ${sets.join(", ")} WHERE id = @id AND lease_owner = @owner AND status = 'generating'`,
      );
      this.updates.set(key, statement);
    }
    return statement;
  }

  async *readReportDocument(report: ReportRecord): AsyncIterable<Uint8Array> {
    const document = report.document;
    if (!document) throw new NotFoundError(`report ${report.id} has no document`);
    // Read again, not taken from `report`: a purged report's document is gone even when the
    // caller still holds the record (and an inline one would otherwise outlive it).
    const row = this.stmt.documentOf.get(report.id, document.blob);
    if (!row) throw new NotFoundError(`the document of report ${report.id} is gone`);
    const inline = row[0];
    if (inline instanceof Uint8Array) {
      yield inline;
      return;
    }
    if (document.size === 0) return;
    yield* this.blobs.read(document.blob);
  }

  /** The blob files that reports' documents are stored in. */
  documentFiles(): string[] {
    return this.stmt.documentFiles.all();
  }

  /** Removes the reports whose expiresAt has passed: each record first, then its document's file. */
  async purgeExpired(now: number): Promise<number> {
    let purged = 0;
    for (;;) {
      const rows = await this.writes.free(() => this.stmt.purgeReports.all(now, PAGE));
      purged += rows.length;
      for (const r of rows) {
        if (r.blob === null || r.inlined !== 0) continue;
        // After the commit: a file that cannot be removed now is an orphan for the sweep.
        await this.blobs.remove(r.blob).catch((err: unknown) => {
          this.logger.warn({ err, blob: r.blob }, "could not remove an expired report's document");
        });
      }
      if (rows.length < PAGE) return purged;
    }
  }
}
