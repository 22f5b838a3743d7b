// ReportService: content-insights reports (content-insights-service.md): creating one (a job
// in the storage, now or as of an earlier moment), its status, its document, the queries over a
// generated report, and comparisons of environments and moments (docs/insights.md).

import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type ComparedSide,
  ComparedSideSchema,
  type CompareEnvironmentsRequest,
  type CompareEnvironmentsResponse,
  CompareEnvironmentsResponseSchema,
  type CreateReportRequest,
  type CreateReportResponse,
  CreateReportResponseSchema,
  DiffKind,
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
} from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import { callerKey } from "../auth/caller.js";
import { BadRequestError, NotFoundError } from "../domain/errors.js";
import { type Moment, momentEvent, parseMoment } from "../domain/history.js";
import { diffReferences, diffResources, type SideFile } from "../insights/environment-diff.js";
import { toDot, toMermaid } from "../insights/graph-export.js";
import { buildReport } from "../insights/report-builder.js";
import type { ReportDocument } from "../insights/report-document.js";
import {
  type DependencyGraph,
  dependenciesOf,
  dependencyGraph,
  dependentsOf,
  missingReferences,
  type RelatedResources,
  referenceCycles,
  unusedResources,
} from "../insights/report-queries.js";
import { parseGetReportInput, parseReportRequest } from "../insights/report-request.js";
import { DEFAULT_REPORT_AVAILABILITY_MS } from "../insights/report-status.js";
import { DEFAULT_FORMAT, type ResourceFormat } from "../insights/resource-format.js";
import type { ResourceSource } from "../insights/resource-source.js";
import type { EnvironmentRecord, ProjectRecord, ReportRecord, StoragePort } from "../storage/port.js";
import { requirePermission } from "./access.js";
import { throwIfCallAborted } from "./call-end.js";
import { environmentSource } from "./environment-source.js";
import { fieldName, fieldPathName } from "./field-names.js";
import { type ProjectCore, uuidInput } from "./project-service.js";
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
  /** The extension map comparisons read design resources by (default DEFAULT_FORMAT, as the worker's). */
  format?: ResourceFormat;
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
  private readonly format: ResourceFormat;
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
    this.format = options.format ?? DEFAULT_FORMAT;
  }

  async createReport(req: CreateReportRequest, ctx: HandlerContext): Promise<CreateReportResponse> {
    const caller = ctx.values.get(callerKey);
    requirePermission(caller, REPORT_PERMISSION);
    const request = parseReportRequest(
      {
        projectID: req.projectId,
        environmentID: req.environmentId,
        additionalFields: req.additionalFields,
        ...(req.asOf === "" ? {} : { asOf: req.asOf }),
      },
      (field) => fieldName(ctx, field),
    );
    const project = await this.projects.project(request.projectID, ctx, "full");
    const environment = await this.projects.environment(project, request.environmentID, ctx);
    // Resolved now, so that a refused moment (400, 410) stores nothing, and a time means the
    // events made by then, not by the time the job runs.
    const asOfEventId =
      request.asOf === undefined ? 0 : await this.eventOf(project.store, request.asOf, fieldName(ctx, "as_of"));
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
      asOfEventId,
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
      asOfEventId: BigInt(report.asOfEventId ?? 0),
      expires: timestampFromMs(report.expiresAt),
    });
  }

  /**
   * Compares two sides, each an environment of the project at a moment (now by default): the
   * files added, removed and changed, and the references added and removed. The access is the
   * creation of a report of each side's environment: the permission, and full access on the
   * project. Nothing is stored.
   */
  async compareEnvironments(
    req: CompareEnvironmentsRequest,
    ctx: HandlerContext,
  ): Promise<CompareEnvironmentsResponse> {
    requirePermission(ctx.values.get(callerKey), REPORT_PERMISSION);
    const named = (field: string) => fieldPathName(ctx, field);
    // The inputs first, every side's, before anything is looked up.
    const fromId = uuidInput(named("from.environment_id"), req.from?.environmentId ?? "");
    const toId =
      (req.to?.environmentId ?? "") === ""
        ? fromId
        : uuidInput(named("to.environment_id"), req.to?.environmentId ?? "");
    const fromMoment = momentInput(req.from?.asOf ?? "", named("from.as_of"));
    const toMoment = momentInput(req.to?.asOf ?? "", named("to.as_of"));
    const project = await this.projects.project(req.projectId, ctx, "full");
    const from = await this.projects.environment(project, fromId, ctx, "from.environment_id");
    const to = toId === fromId ? from : await this.projects.environment(project, toId, ctx, "to.environment_id");
    const fromEvent = await this.sideEvent(project.store, fromMoment, named("from.as_of"));
    const toEvent = await this.sideEvent(project.store, toMoment, named("to.as_of"));
    const before = await this.readSide(project, from, fromMoment === undefined ? 0 : fromEvent, ctx);
    const after = await this.readSide(project, to, toMoment === undefined ? 0 : toEvent, ctx);
    const side = (environment: EnvironmentRecord, event: number, moment: Moment | undefined): ComparedSide =>
      create(ComparedSideSchema, {
        environmentId: environment.id,
        environmentName: environment.name,
        eventId: BigInt(event),
        now: moment === undefined,
      });
    const kinds = { added: DiffKind.ADDED, removed: DiffKind.REMOVED, changed: DiffKind.CHANGED } as const;
    return create(CompareEnvironmentsResponseSchema, {
      from: side(from, fromEvent, fromMoment),
      to: side(to, toEvent, toMoment),
      resources: diffResources(before.files, after.files).map((d) => ({
        kind: kinds[d.kind],
        path: d.path,
        fromMd5: d.fromMd5 ?? "",
        toMd5: d.toMd5 ?? "",
      })),
      references: diffReferences(before.graph, after.graph).map((d) => ({
        kind: kinds[d.kind],
        path: d.path,
        referenceKind: d.referenceKind,
        target: d.target,
        missing: d.missing === true,
        isDefault: d.isDefault === true,
      })),
    });
  }

  /**
   * The event a moment names in the project's store, checked as an as-of read checks it
   * (docs/history.md): 400 for one that has not happened, 410 for one before the history horizon.
   * Event 0 is refused too: the store had nothing then, and 0 stands for "now" in a report.
   */
  private async eventOf(store: string, moment: Moment, field: string): Promise<number> {
    const record = await this.storage.getStore(store);
    if (!record || record.deleted) throw new NotFoundError(`store ${store} of the project not found`);
    const atTime = "time" in moment ? await this.storage.eventAt(store, moment.time) : undefined;
    const event = momentEvent(record, moment, atTime);
    if (event === 0) {
      const when = "time" in moment ? new Date(moment.time).toISOString() : "event 0";
      throw new BadRequestError(`${field}: store ${store} had no event yet at ${when}: there is nothing to read then`);
    }
    return event;
  }

  /** The event a side is read at: its moment's, or for now the store's last event. */
  private async sideEvent(store: string, moment: Moment | undefined, field: string): Promise<number> {
    if (moment !== undefined) return this.eventOf(store, moment, field);
    const record = await this.storage.getStore(store);
    if (!record || record.deleted) throw new NotFoundError(`store ${store} of the project not found`);
    return record.lastEventId;
  }

  /**
   * One side of a comparison: its files with their MD5s, and its dependency graph, made by the
   * report builder over the environment at the event (0: now), as a report of it would be.
   */
  private async readSide(
    project: ProjectRecord,
    environment: EnvironmentRecord,
    asOfEventId: number,
    ctx: HandlerContext,
  ): Promise<{ files: SideFile[]; graph: DependencyGraph }> {
    const files: SideFile[] = [];
    const source = environmentSource({
      storage: this.storage,
      store: project.store,
      directory: environment.name,
      asOfEventId,
    });
    const recording: ResourceSource = {
      async *list() {
        for await (const resource of source.list()) {
          files.push({ path: resource.path, md5: resource.md5 ?? "" });
          yield resource;
        }
      },
    };
    const document = await buildReport(recording, {
      creator: "",
      projectID: project.id,
      projectName: project.name,
      environmentID: environment.id,
      environmentName: environment.name,
      format: this.format,
      signal: ctx.signal,
    });
    throwIfCallAborted(ctx);
    return { files, graph: dependencyGraph(document) };
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

/** An optional moment input: undefined when empty. */
function momentInput(text: string, field: string): Moment | undefined {
  return text === "" ? undefined : parseMoment(text, field);
}

function pathInput(path: string): string {
  if (path === "") throw new BadRequestError("path is required: the resource's path within the environment");
  return path;
}

function relatedMessage(related: RelatedResources) {
  const item = (r: RelatedResources["all"][number]) => ({ ...r, missing: r.missing === true });
  return { resource: related.resource, direct: related.direct.map(item), all: related.all.map(item) };
}
