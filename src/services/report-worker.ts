// The report worker: claims report jobs from the storage with a lease, generates each report
// over the environment's resources, stores the document and marks the report generated. Any
// instance's worker may take any job; a job whose worker died is taken again once its lease
// is over (docs/insights.md, Generation).

import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { HistoryPurgedError, UnavailableError } from "../domain/errors.js";
import { buildReport } from "../insights/report-builder.js";
import type { AdditionalField } from "../insights/report-document.js";
import { reportJsonChunks } from "../insights/report-json.js";
import { DEFAULT_FORMAT, type ResourceFormat } from "../insights/resource-format.js";
import type { ReportJobUpdate, ReportRecord, StoragePort } from "../storage/port.js";
import { environmentSource } from "./environment-source.js";
import type { ReportNotifier } from "./report-notifier.js";

export interface ReportWorkerOptions {
  storage: StoragePort;
  notifier: ReportNotifier;
  /** How long a generated or failed report stays available, in milliseconds. */
  availabilityMs: number;
  now?: () => number;
  logger?: Logger;
  /** A job's lease, renewed while it runs (default 30 s). */
  leaseMs?: number;
  /** How often the storage is checked for jobs stored by other instances (default 1 s). */
  pollInterval?: number;
  /** Attempts before a report is marked failed (default 3). */
  maxAttempts?: number;
  /** Wait before the next attempt, multiplied by the attempts so far (default 5 s). */
  retryDelayMs?: number;
  format?: ResourceFormat;
  maxDocumentBytes?: number;
  /** Told about every job this worker takes (metrics). */
  observer?: ReportJobObserver;
}

/**
 * How a job taken by this worker ended: generated, failed for good, failed an attempt that will
 * be retried, released at shutdown, lost (its lease went to another worker before it finished), or
 * error (its state could not be written: the lease runs out and any worker takes it again).
 */
export type ReportJobOutcome = "generated" | "failed" | "retry" | "released" | "lost" | "error";

export interface ReportJobObserver {
  /** The worker took a job and starts generating. */
  started(): void;
  /** The job ended; `seconds` since it was taken. */
  ended(outcome: ReportJobOutcome, seconds: number): void;
}

export class ReportWorker {
  /** Lease owner name of this worker: unique per process and start. */
  readonly id = `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
  private readonly storage: StoragePort;
  private readonly notifier: ReportNotifier;
  private readonly now: () => number;
  private readonly leaseMs: number;
  private readonly pollInterval: number;
  private readonly maxAttempts: number;
  private readonly retryDelayMs: number;
  private readonly stop = new AbortController();
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private readonly unsubscribe: () => void;

  constructor(private readonly options: ReportWorkerOptions) {
    this.storage = options.storage;
    this.notifier = options.notifier;
    this.now = options.now ?? Date.now;
    this.leaseMs = options.leaseMs ?? 30_000;
    this.pollInterval = options.pollInterval ?? 1000;
    this.maxAttempts = options.maxAttempts ?? 3;
    this.retryDelayMs = options.retryDelayMs ?? 5000;
    this.unsubscribe = this.notifier.onJob(() => this.wake?.());
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops taking jobs, ends the running generation and gives its job back at once. */
  async close(): Promise<void> {
    this.unsubscribe();
    this.stop.abort(new Error("the server is shutting down"));
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    const signal = this.stop.signal;
    while (!signal.aborted) {
      let worked = false;
      try {
        worked = await this.runOnce();
      } catch (err) {
        this.options.logger?.warn({ err }, "report worker: could not take a job");
      }
      if (!worked && !signal.aborted) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.pollInterval);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = undefined;
      }
    }
  }

  /** Takes one job and runs it; false when there was none. */
  async runOnce(): Promise<boolean> {
    const job = await this.storage.insights.claimReportJob(this.id, this.now(), this.leaseMs);
    if (!job) return false;
    const observer = this.options.observer;
    const taken = performance.now();
    observer?.started();
    let outcome: ReportJobOutcome = "error";
    try {
      outcome = await this.runJob(job);
    } finally {
      observer?.ended(outcome, (performance.now() - taken) / 1000);
    }
    return true;
  }

  private async runJob(job: ReportRecord): Promise<ReportJobOutcome> {
    if (job.attempts > this.maxAttempts) {
      const done = await this.finish(job, {
        status: "failed",
        reason: `generation failed ${this.maxAttempts} times; last error: ${job.reason || "unknown"}`,
      });
      return done ? "failed" : "lost";
    }
    try {
      const status = await this.generateThroughOutages(job);
      return status ?? "lost";
    } catch (err) {
      const reason = (err as Error).message;
      if (this.stop.signal.aborted) {
        // Shutting down: the job goes back, for this or another instance to take.
        const done = await this.update(job, { leaseOwner: "", leaseExpires: this.now(), reason: job.reason });
        return done ? "released" : "lost";
      }
      // The moment the report describes is gone (docs/insights.md): no later attempt can read it.
      if (err instanceof HistoryPurgedError) {
        const done = await this.finish(job, { status: "failed", reason });
        return done ? "failed" : "lost";
      }
      if (job.attempts >= this.maxAttempts) {
        const done = await this.finish(job, {
          status: "failed",
          reason: `generation failed ${job.attempts} times; last error: ${reason}`,
        });
        return done ? "failed" : "lost";
      }
      this.options.logger?.warn({ err, report: job.id, attempt: job.attempts }, "report generation failed; will retry");
      const done = await this.update(job, {
        leaseOwner: "",
        leaseExpires: this.now() + this.retryDelayMs * job.attempts,
        reason,
      });
      return done ? "retry" : "lost";
    }
  }

  /**
   * Generates, starting again after a pause when the storage was away (UnavailableError) for as
   * long as the job's lease would last: an outage of the database is not the report's failure,
   * and should not use up its attempts. A longer outage costs one attempt per lease.
   */
  private async generateThroughOutages(job: ReportRecord): Promise<"generated" | "failed" | undefined> {
    // Real time, whatever clock the jobs are dated by: an outage lasts in real time.
    const until = performance.now() + this.leaseMs - this.retryDelayMs;
    for (;;) {
      try {
        return await this.generate(job);
      } catch (err) {
        if (!(err instanceof UnavailableError) || this.stop.signal.aborted || performance.now() >= until) throw err;
        this.options.logger?.warn(
          { report: job.id, err: err.message },
          "report generation: storage away, starting again",
        );
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.retryDelayMs);
          const stopped = () => {
            clearTimeout(timer);
            resolve();
          };
          this.stop.signal.addEventListener("abort", stopped, { once: true });
        });
      }
    }
  }

  /** Generates the report and finishes the job; undefined when the job was no longer this worker's. */
  private async generate(job: ReportRecord): Promise<"generated" | "failed" | undefined> {
    const project = await this.storage.insights.getProject(job.projectId);
    const environment = await this.storage.insights.getEnvironment(job.environmentId);
    if (!project || !environment) {
      const done = await this.finish(job, {
        status: "failed",
        reason: "the project or the environment no longer exists",
      });
      return done ? "failed" : undefined;
    }
    const additionalFields = job.additionalFields as AdditionalField[];
    let promotions: Map<string, { date: number; by: string }> | undefined;
    if (additionalFields.length > 0) {
      promotions = new Map();
      for await (const p of this.storage.insights.listPromotions(environment.id)) promotions.set(p.path, p);
    }
    const lost = new AbortController();
    const signal = AbortSignal.any([this.stop.signal, lost.signal]);
    let renewed = this.now();
    const document = await buildReport(
      environmentSource({
        storage: this.storage,
        store: project.store,
        directory: environment.name,
        promotions,
        asOfEventId: job.asOfEventId ?? 0,
      }),
      {
        creator: job.creator,
        projectID: project.id,
        projectName: project.name,
        environmentID: environment.id,
        environmentName: environment.name,
        additionalFields,
        created: new Date(job.created),
        format: this.options.format ?? DEFAULT_FORMAT,
        maxDocumentBytes: this.options.maxDocumentBytes,
        signal,
        onProgress: async () => {
          if (this.now() - renewed < this.leaseMs / 3) return;
          renewed = this.now();
          if (!(await this.update(job, { leaseExpires: renewed + this.leaseMs }))) {
            lost.abort(new Error("the job's lease was lost to another worker"));
          }
        },
      },
    );
    signal.throwIfAborted();
    const blob = await this.storage.writeBlob(toAsync(reportJsonChunks(document)), {
      maxSize: Number.MAX_SAFE_INTEGER,
    });
    // The document is the storage's from here: it discards it if the job was no longer ours.
    const done = await this.finish(job, { status: "generated", document: blob, reason: "" });
    return done ? "generated" : undefined;
  }

  private async finish(job: ReportRecord, outcome: ReportJobUpdate): Promise<boolean> {
    const finished = this.now();
    const done = await this.update(job, {
      ...outcome,
      finished,
      expiresAt: finished + this.options.availabilityMs,
      leaseOwner: "",
      leaseExpires: finished,
    });
    if (done) {
      this.options.logger?.info({ report: job.id, status: outcome.status, reason: outcome.reason }, "report finished");
    }
    return done;
  }

  private async update(job: ReportRecord, update: ReportJobUpdate): Promise<boolean> {
    const done = await this.storage.insights.updateReportJob(job.id, this.id, update);
    if (done) this.notifier.changed(job.id);
    return done;
  }
}

async function* toAsync<T>(items: Iterable<T>): AsyncIterable<T> {
  yield* items;
}
