// ReportService: content-insights reports (content-insights-service.md): creating one (a job
// in the storage), its status, its document, and the queries over a generated report.

import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { callerKey } from "../auth/caller.js";
import { BadRequestError, NotFoundError } from "../domain/errors.js";
import {
  type CreateReportRequest,
  type CreateReportResponse,
  CreateReportResponseSchema,
  type ExportGraphRequest,
  type ExportGraphResponse,
  ExportGraphResponseSchema,
  type GetDependenciesRequest,
  type GetDependenciesResponse,
  GetDependenciesResponseSchema,
  type GetDependentsRequest,
  type GetDependentsResponse,
  GetDependentsResponseSchema,
  type GetReportDocumentRequest,
  type GetReportDocumentResponse,
  GetReportDocumentResponseSchema,
  type GetReportRequest,
  type GetReportResponse,
  GetReportResponseSchema,
  GraphFormat,
  type ListCyclesRequest,
  type ListCyclesResponse,
  ListCyclesResponseSchema,
  type ListMissingReferencesRequest,
  type ListMissingReferencesResponse,
  ListMissingReferencesResponseSchema,
  type ListReportsRequest,
  type ListReportsResponse,
  ListReportsResponseSchema,
  type ListUnusedResourcesRequest,
  type ListUnusedResourcesResponse,
  ListUnusedResourcesResponseSchema,
  type ReportKey,
  type ReportService,
  ReportState,
  type ReportStatus,
  ReportStatusSchema,
  type WatchReportRequest,
  type WatchReportResponse,
  WatchReportResponseSchema,
} from "../gen/trove/insights/v1/reports_pb.js";
import { toDot, toMermaid } from "../insights/graph-export.js";
import type { ReportDocument } from "../insights/report-document.js";
import {
  dependenciesOf,
  dependentsOf,
  missingReferences,
  type RelatedResources,
  referenceCycles,
  unusedResources,
} from "../insights/report-queries.js";
import { parseGetReportInput, parseReportRequest } from "../insights/report-request.js";
import { DEFAULT_REPORT_AVAILABILITY_MS } from "../insights/report-status.js";
import type { ReportRecord, StoragePort } from "../storage/port.js";
import { requirePermission } from "./access.js";
import { throwIfCallAborted } from "./call-end.js";
import { fieldName } from "./field-names.js";
import type { ProjectCore } from "./project-service.js";
import type { ReportNotifier } from "./report-notifier.js";

/** The permission every report call needs (content-insights-service.md, Authentication). */
export const REPORT_PERMISSION = "report:content-insights";
/** Base path of the REST face of reports; `href` points below it. */
export const REPORTS_PATH = "/insights/v1/reports";

export interface ReportServiceOptions {
  storage: StoragePort;
  projects: ProjectCore;
  notifier: ReportNotifier;
  /** How long a report stays available after it finished (default 90 days). */
  availabilityMs?: number;
  now?: () => number;
  /** How often a watcher re-reads the status, for changes made by other instances (default 1 s). */
  watchInterval?: number;
  /** Generated reports kept parsed for queries (default 8). */
  cachedDocuments?: number;
}

/** The REST path of a report's document: where `href` points. */
export function reportDocumentHref(report: { id: string; projectId: string; environmentId: string }): string {
  return `${REPORTS_PATH}/${report.id}/document?projectID=${report.projectId}&environmentID=${report.environmentId}`;
}

const STATES: Record<ReportRecord["status"], ReportState> = {
  generating: ReportState.GENERATING,
  generated: ReportState.GENERATED,
  failed: ReportState.FAILED,
};

export class ReportCore implements ServiceImpl<typeof ReportService> {
  private readonly storage: StoragePort;
  private readonly projects: ProjectCore;
  private readonly notifier: ReportNotifier;
  private readonly now: () => number;
  readonly availabilityMs: number;
  private readonly watchInterval: number;
  private readonly cacheSize: number;
  /** Parsed documents by report ID, least recently used first. A report never changes once generated. */
  private readonly documents = new Map<string, Promise<ReportDocument>>();

  constructor(options: ReportServiceOptions) {
    this.storage = options.storage;
    this.projects = options.projects;
    this.notifier = options.notifier;
    this.now = options.now ?? Date.now;
    this.availabilityMs = options.availabilityMs ?? DEFAULT_REPORT_AVAILABILITY_MS;
    this.watchInterval = options.watchInterval ?? 1000;
    this.cacheSize = options.cachedDocuments ?? 8;
  }

  async createReport(req: CreateReportRequest, ctx: HandlerContext): Promise<CreateReportResponse> {
    const caller = ctx.values.get(callerKey);
    requirePermission(caller, REPORT_PERMISSION);
    const request = parseReportRequest(
      { projectID: req.projectId, environmentID: req.environmentId, additionalFields: req.additionalFields },
      (field) => fieldName(ctx, field),
    );
    const project = await this.projects.project(request.projectID, ctx, "full");
    const environment = await this.projects.environment(project, request.environmentID, ctx);
    const created = this.now();
    const report: ReportRecord = {
      id: randomUUID(),
      projectId: project.id,
      environmentId: environment.id,
      creator: caller.subject,
      created,
      additionalFields: request.additionalFields,
      status: "generating",
      finished: 0,
      expiresAt: created + this.availabilityMs,
      reason: "",
      attempts: 0,
      leaseOwner: "",
      leaseExpires: 0,
      document: null,
    };
    await this.storage.insights.createReport(report);
    this.notifier.jobAdded();
    return create(CreateReportResponseSchema, { reportId: [report.id] });
  }

  async getReport(req: GetReportRequest, ctx: HandlerContext): Promise<GetReportResponse> {
    const report = await this.report(req.key, ctx);
    return create(GetReportResponseSchema, { status: this.status(report) });
  }

  async listReports(req: ListReportsRequest, ctx: HandlerContext): Promise<ListReportsResponse> {
    requirePermission(ctx.values.get(callerKey), REPORT_PERMISSION);
    const project = await this.projects.project(req.projectId, ctx, "full");
    const environment = await this.projects.environment(project, req.environmentId, ctx);
    const now = this.now();
    const reports = (await this.storage.insights.listReports(project.id, environment.id)).filter(
      (r) => now < r.expiresAt,
    );
    return create(ListReportsResponseSchema, { reports: reports.map((r) => this.status(r)) });
  }

  /**
   * The status now, then after every change until it is no longer generating (the REST face's
   * `wait` and gRPC's WatchReport). A deadline that runs out before the report is done ends it
   * with DEADLINE_EXCEEDED, a client's cancellation with CANCELLED (call-end.ts).
   */
  async *watchReport(req: WatchReportRequest, ctx: HandlerContext): AsyncIterable<WatchReportResponse> {
    let report = await this.report(req.key, ctx);
    yield create(WatchReportResponseSchema, { status: this.status(report) });
    while (report.status === "generating") {
      throwIfCallAborted(ctx);
      await this.notifier.waitForChange(report.id, this.watchInterval, ctx.signal);
      throwIfCallAborted(ctx);
      const next = await this.report(req.key, ctx);
      if (next.status !== report.status) yield create(WatchReportResponseSchema, { status: this.status(next) });
      report = next;
    }
  }

  async *getReportDocument(
    req: GetReportDocumentRequest,
    ctx: HandlerContext,
  ): AsyncIterable<GetReportDocumentResponse> {
    const report = await this.generated(req.key, ctx);
    for await (const chunk of this.storage.insights.readReportDocument(report)) {
      yield create(GetReportDocumentResponseSchema, { chunk });
    }
  }

  /** A generated report that the caller may read: for the REST face, which streams the document itself. */
  async generatedReport(key: ReportKey | undefined, ctx: HandlerContext): Promise<ReportRecord> {
    return this.generated(key, ctx);
  }

  /** Whole seconds until the report expires (a cache lifetime). */
  secondsLeft(report: ReportRecord): number {
    return Math.max(0, Math.floor((report.expiresAt - this.now()) / 1000));
  }

  /** The stored document's bytes (REST face). */
  documentBytes(report: ReportRecord): AsyncIterable<Uint8Array> {
    return this.storage.insights.readReportDocument(report);
  }

  async getDependencies(req: GetDependenciesRequest, ctx: HandlerContext): Promise<GetDependenciesResponse> {
    const related = dependenciesOf(await this.document(req.key, ctx), pathInput(req.path));
    return create(GetDependenciesResponseSchema, relatedMessage(related));
  }

  async getDependents(req: GetDependentsRequest, ctx: HandlerContext): Promise<GetDependentsResponse> {
    const related = dependentsOf(await this.document(req.key, ctx), pathInput(req.path));
    return create(GetDependentsResponseSchema, relatedMessage(related));
  }

  async listUnusedResources(
    req: ListUnusedResourcesRequest,
    ctx: HandlerContext,
  ): Promise<ListUnusedResourcesResponse> {
    const unused = unusedResources(await this.document(req.key, ctx));
    return create(ListUnusedResourcesResponseSchema, { resources: unused.map((r) => ({ ...r, depth: 0 })) });
  }

  async listMissingReferences(
    req: ListMissingReferencesRequest,
    ctx: HandlerContext,
  ): Promise<ListMissingReferencesResponse> {
    const missing = missingReferences(await this.document(req.key, ctx));
    return create(ListMissingReferencesResponseSchema, { references: missing });
  }

  async listCycles(req: ListCyclesRequest, ctx: HandlerContext): Promise<ListCyclesResponse> {
    const cycles = referenceCycles(await this.document(req.key, ctx));
    return create(ListCyclesResponseSchema, { cycles });
  }

  async exportGraph(req: ExportGraphRequest, ctx: HandlerContext): Promise<ExportGraphResponse> {
    if (req.format !== GraphFormat.DOT && req.format !== GraphFormat.MERMAID) {
      throw new BadRequestError("format is required: dot or mermaid");
    }
    const document = await this.document(req.key, ctx);
    const options = req.root === "" ? {} : { root: pathInput(req.root) };
    const text = req.format === GraphFormat.DOT ? toDot(document, options) : toMermaid(document, options);
    return create(ExportGraphResponseSchema, { text });
  }

  status(report: ReportRecord): ReportStatus {
    return create(ReportStatusSchema, {
      id: [report.id],
      creator: report.creator,
      created: [timestampFromMs(report.created)],
      state: STATES[report.status],
      href: report.status === "generated" ? reportDocumentHref(report) : "",
      reason: report.status === "failed" ? report.reason : "",
    });
  }

  /**
   * The report a key names, if the caller may see it: the permission first, then the inputs,
   * the project (full access), the environment, and a report made for exactly those that has
   * not expired. Anything else is "not found", never someone else's report.
   */
  private async report(key: ReportKey | undefined, ctx: HandlerContext): Promise<ReportRecord> {
    requirePermission(ctx.values.get(callerKey), REPORT_PERMISSION);
    const input = parseGetReportInput(
      { reportID: key?.reportId ?? "", projectID: key?.projectId ?? "", environmentID: key?.environmentId ?? "" },
      [],
      (field) => fieldName(ctx, field),
    );
    const project = await this.projects.project(input.projectID, ctx, "full");
    const environment = await this.projects.environment(project, input.environmentID, ctx);
    const report = await this.storage.insights.getReport(input.reportID);
    if (
      !report ||
      report.projectId !== project.id ||
      report.environmentId !== environment.id ||
      this.now() >= report.expiresAt
    ) {
      this.documents.delete(input.reportID);
      throw new NotFoundError(`report ${input.reportID} not found for this project and environment (or expired)`);
    }
    return report;
  }

  private async generated(key: ReportKey | undefined, ctx: HandlerContext): Promise<ReportRecord> {
    const report = await this.report(key, ctx);
    if (report.status !== "generated") {
      throw new NotFoundError(`report ${report.id} is ${report.status}: its document is not available`);
    }
    return report;
  }

  private async document(key: ReportKey | undefined, ctx: HandlerContext): Promise<ReportDocument> {
    const report = await this.generated(key, ctx);
    let parsed = this.documents.get(report.id);
    if (parsed) {
      this.documents.delete(report.id);
    } else {
      parsed = this.parse(report);
      parsed.catch(() => this.documents.delete(report.id));
    }
    this.documents.set(report.id, parsed);
    for (const oldest of this.documents.keys()) {
      if (this.documents.size <= this.cacheSize) break;
      this.documents.delete(oldest);
    }
    return parsed;
  }

  private async parse(report: ReportRecord): Promise<ReportDocument> {
    const chunks: Uint8Array[] = [];
    for await (const chunk of this.storage.insights.readReportDocument(report)) chunks.push(chunk);
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as ReportDocument;
  }
}

function pathInput(path: string): string {
  if (path === "") throw new BadRequestError("path is required: the resource's path within the environment");
  return path;
}

function relatedMessage(related: RelatedResources) {
  const item = (r: RelatedResources["all"][number]) => ({ ...r, missing: r.missing === true });
  return { resource: related.resource, direct: related.direct.map(item), all: related.all.map(item) };
}
