// The insights REST face under /insights/v1: projects, environments and promotion, the
// reports of content-insights-service.md, and comparisons of environments and moments
// (docs/insights.md has every route, body and status). Each route parses, calls ProjectCore or
// ReportCore, and renders JSON.

import { create, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { type Timestamp, timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createHandlerContext, type HandlerContext } from "@connectrpc/connect";
import { codeFromString } from "@connectrpc/connect/protocol-connect";
import {
  CreateEnvironmentRequestSchema,
  CreateProjectRequestSchema,
  type Environment,
  GetEnvironmentRequestSchema,
  GetProjectRequestSchema,
  ListEnvironmentsRequestSchema,
  ListProjectsRequestSchema,
  type Project,
  ProjectService,
  PromoteRequestSchema,
} from "@trove/sdk/gen/trove/insights/v1/projects_pb.js";
import {
  type ComparedSide,
  CompareEnvironmentsRequestSchema,
  type CompareEnvironmentsResponse,
  CreateReportRequestSchema,
  DiffKind,
  ExportGraphRequestSchema,
  GetDependenciesRequestSchema,
  GetDependentsRequestSchema,
  GetReportRequestSchema,
  GraphFormat,
  ListCyclesRequestSchema,
  ListMissingReferencesRequestSchema,
  ListReportsRequestSchema,
  ListUnusedResourcesRequestSchema,
  type RelatedResource,
  type ReportKey,
  ReportKeySchema,
  ReportService,
  ReportState,
  type ReportStatus,
  WatchReportRequestSchema,
} from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import { BadRequestError, NotFoundError } from "../domain/errors.js";
import { parseJsonBody, quoteValue } from "../domain/json-body.js";
import { parseGetReportInput } from "../insights/report-request.js";
import { fieldNamesKey } from "../services/field-names.js";
import type { ProjectCore } from "../services/project-service.js";
import { REPORTS_PATH, type ReportCore } from "../services/report-service.js";
import { INSIGHTS_STATUS, sendError, statusOf } from "./errors.js";
import {
  header,
  REST_FIELD_NAMES,
  type RequestUrl,
  type RestRequest,
  type RestResponse,
  readBody,
  requestSignal,
  restContextValues,
  send,
  start,
  write,
} from "./http.js";

export const INSIGHTS_PREFIX = "/insights/v1/";
const PROJECTS_PATH = "/insights/v1/projects";
/** Largest JSON body of a create call, and of a promotion (which may list many paths). */
const MAX_BODY = 64 * 1024;
const MAX_PROMOTION_BODY = 1024 * 1024;
/** Longest `wait` of a status request, in seconds. */
const MAX_WAIT_SECONDS = 60;

/**
 * The insights face's names of the inputs of its extensions (docs/insights.md), beside REST's:
 * a report's moment, and the two sides of a comparison.
 */
const INSIGHTS_FIELD_NAMES = {
  ...REST_FIELD_NAMES,
  as_of: "asOf",
  "from.environment_id": "environmentID",
  "from.as_of": "asOf",
  "to.environment_id": "toEnvironmentID",
  "to.as_of": "toAsOf",
};

const JSON_TYPE = "application/json; charset=utf-8";
const NO_STORE = { "Cache-Control": "no-store" };

function sendJson(res: RestResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  send(res, status, { "Content-Type": JSON_TYPE, ...NO_STORE, ...headers }, `${JSON.stringify(value)}\n`);
}

function iso(t: Timestamp | undefined): string {
  return new Date(t ? timestampMs(t) : 0).toISOString();
}

function projectJson(p: Project | undefined) {
  if (!p) throw new Error("no project in the response");
  return { id: p.id, name: p.name, account: p.account, store: p.store, created: iso(p.created), creator: p.creator };
}

function environmentJson(e: Environment | undefined) {
  if (!e) throw new Error("no environment in the response");
  return { id: e.id, projectID: e.projectId, name: e.name, created: iso(e.created), creator: e.creator };
}

const STATUS_NAMES: Partial<Record<ReportState, string>> = {
  [ReportState.GENERATING]: "generating",
  [ReportState.GENERATED]: "generated",
  [ReportState.FAILED]: "failed",
};

/** The spec's report status record: id and created are arrays of one element. */
function statusJson(s: ReportStatus | undefined) {
  if (!s) throw new Error("no status in the response");
  const record: Record<string, unknown> = {
    id: s.id,
    creator: s.creator,
    created: s.created.map((t) => iso(t)),
    status: STATUS_NAMES[s.state] ?? "unknown",
  };
  if (s.href !== "") record.href = s.href;
  if (s.reason !== "") record.reason = s.reason;
  // Trove's extension: only for a report as of an earlier moment, so the spec's record is unchanged otherwise.
  if (s.asOfEventId !== 0n) record.asOfEvent = Number(s.asOfEventId);
  return record;
}

const DIFF_KINDS: Partial<Record<DiffKind, string>> = {
  [DiffKind.ADDED]: "added",
  [DiffKind.REMOVED]: "removed",
  [DiffKind.CHANGED]: "changed",
};

function sideJson(s: ComparedSide | undefined) {
  if (!s) throw new Error("no side in the comparison");
  return { environmentID: s.environmentId, environmentName: s.environmentName, event: Number(s.eventId), now: s.now };
}

/** A comparison as JSON: optional keys only where they say something (as the report document's `missing`). */
function comparisonJson(c: CompareEnvironmentsResponse) {
  return {
    from: sideJson(c.from),
    to: sideJson(c.to),
    resources: c.resources.map((r) => {
      const item: Record<string, unknown> = { change: DIFF_KINDS[r.kind] ?? "unknown", path: r.path };
      if (r.fromMd5 !== "") item.fromMD5 = r.fromMd5;
      if (r.toMd5 !== "") item.toMD5 = r.toMd5;
      return item;
    }),
    references: c.references.map((r) => {
      const item: Record<string, unknown> = {
        change: DIFF_KINDS[r.kind] ?? "unknown",
        path: r.path,
        kind: r.referenceKind,
        target: r.target,
      };
      if (r.missing) item.missing = true;
      if (r.isDefault) item.isDefault = true;
      return item;
    }),
  };
}

/** A moment in a JSON body: an ISO 8601 date-time (a string) or an event id (a string or a whole number). */
function momentField(object: Record<string, unknown>, field: string): string {
  const value = object[field];
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return String(value);
  if (value === undefined || value === null || typeof value === "string") return stringField(object, field, false);
  throw new BadRequestError(
    `${field} must be an event id or an ISO 8601 date-time with a time zone, not ${quoteValue(value)}`,
  );
}

function relatedJson(r: RelatedResource) {
  const item: Record<string, unknown> = { path: r.path, type: r.type, depth: r.depth };
  if (r.missing) item.missing = true;
  return item;
}

/** A JSON object body; unknown fields are refused by `fields`. */
function parseJsonObject(text: string, what: string, fields: readonly string[]): Record<string, unknown> {
  return checkedObject(parseJsonBody(text, what), what, fields);
}

/** A JSON value that must be an object with only `fields`. */
function checkedObject(value: unknown, what: string, fields: readonly string[]): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new BadRequestError(`the ${what} must be a JSON object`);
  }
  const object = value as Record<string, unknown>;
  for (const key of Object.keys(object)) {
    if (!fields.includes(key)) {
      throw new BadRequestError(`unknown field ${quoteValue(key)} in the ${what}; allowed: ${fields.join(", ")}`);
    }
  }
  return object;
}

function stringField(object: Record<string, unknown>, field: string, required: boolean): string {
  const value = object[field];
  if (value === undefined || value === null) {
    if (required) throw new BadRequestError(`${field} is required`);
    return "";
  }
  if (typeof value !== "string") throw new BadRequestError(`${field} must be a string, not ${quoteValue(value)}`);
  return value;
}

async function jsonBody(req: RestRequest, max: number, what: string, fields: readonly string[]) {
  const type = (header(req, "content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (type !== "" && type !== "application/json") {
    throw new BadRequestError(`unsupported Content-Type ${type}: send application/json`);
  }
  const text = await readBody(req, max, what);
  if (text.trim() === "") throw new BadRequestError(`a JSON body is required: the ${what}`);
  return parseJsonObject(text, what, fields);
}

/** Query parameters as an object; a repeated one becomes an array (which the checks refuse). */
function queryObject(search: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of new URLSearchParams(search)) {
    const seen = out[name];
    out[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return out;
}

function single(query: Record<string, string | string[]>, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) throw new BadRequestError(`query parameter ${name} given more than once`);
  return value;
}

function noQuery(search: string): void {
  for (const [name] of new URLSearchParams(search)) {
    throw new BadRequestError(`unknown query parameter ${name}: this endpoint takes none`);
  }
}

function methodNotAllowed(res: RestResponse, method: string | undefined, allow: string): void {
  send(res, 405, { Allow: allow, "Content-Type": "text/plain; charset=utf-8" }, `method ${method} not allowed\n`);
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new BadRequestError("malformed percent-encoding in the path");
  }
}

export class InsightsRoutes {
  constructor(
    private readonly projects: ProjectCore,
    private readonly reports: ReportCore,
  ) {}

  async handle(req: RestRequest, res: RestResponse, url: RequestUrl): Promise<void> {
    try {
      const segments = url.pathname.slice(INSIGHTS_PREFIX.length).split("/").map(decodeSegment);
      const [collection, id, sub, subId, ...rest] = segments;
      if (collection === "projects") return await this.projectRoutes(req, res, url, id, sub, subId, rest);
      if (collection === "reports") return await this.reportRoutes(req, res, url, id, sub, subId, rest);
      if (collection === "comparison" && id === undefined) return await this.comparison(req, res, url);
      throw new NotFoundError(`no such endpoint: ${url.pathname}`);
    } catch (err) {
      sendError(req, res, err, INSIGHTS_STATUS);
    }
  }

  private context(
    req: RestRequest,
    res: RestResponse,
    service: DescService,
    method: DescMethod,
    timeoutMs?: number,
  ): HandlerContext {
    return createHandlerContext({
      timeoutMs,
      service,
      method,
      protocolName: "rest",
      requestMethod: req.method ?? "GET",
      url: req.url ?? "",
      requestSignal: requestSignal(res),
      contextValues: restContextValues(req).set(fieldNamesKey, INSIGHTS_FIELD_NAMES),
    });
  }

  /** GET /insights/v1/comparison: two sides, each an environment at a moment (docs/insights.md). */
  private async comparison(req: RestRequest, res: RestResponse, url: RequestUrl): Promise<void> {
    if (req.method !== "GET") return methodNotAllowed(res, req.method, "GET");
    const allowed = ["projectID", "environmentID", "asOf", "toEnvironmentID", "toAsOf"];
    const query = queryObject(url.search);
    for (const name of Object.keys(query)) {
      if (!allowed.includes(name)) {
        throw new BadRequestError(`unknown query parameter ${name}; allowed: ${allowed.join(", ")}`);
      }
    }
    const out = await this.reports.compareEnvironments(
      create(CompareEnvironmentsRequestSchema, {
        projectId: single(query, "projectID") ?? "",
        from: { environmentId: single(query, "environmentID") ?? "", asOf: single(query, "asOf") ?? "" },
        to: { environmentId: single(query, "toEnvironmentID") ?? "", asOf: single(query, "toAsOf") ?? "" },
      }),
      this.context(req, res, ReportService, ReportService.method.compareEnvironments),
    );
    return sendJson(res, 200, comparisonJson(out));
  }

  private async projectRoutes(
    req: RestRequest,
    res: RestResponse,
    url: RequestUrl,
    id: string | undefined,
    sub: string | undefined,
    subId: string | undefined,
    rest: string[],
  ): Promise<void> {
    const p = ProjectService.method;
    const ctx = (m: DescMethod) => this.context(req, res, ProjectService, m);
    if (rest.length > 0 || (id === "" && sub === undefined))
      throw new NotFoundError(`no such endpoint: ${url.pathname}`);
    if (id === undefined) {
      // /insights/v1/projects
      if (req.method === "GET") {
        noQuery(url.search);
        const out = await this.projects.listProjects(create(ListProjectsRequestSchema), ctx(p.listProjects));
        return sendJson(res, 200, { projects: out.projects.map(projectJson) });
      }
      if (req.method === "POST") {
        noQuery(url.search);
        const body = await jsonBody(req, MAX_BODY, "project", ["name", "account", "store"]);
        const out = await this.projects.createProject(
          create(CreateProjectRequestSchema, {
            name: stringField(body, "name", true),
            account: stringField(body, "account", false),
            store: stringField(body, "store", false),
          }),
          ctx(p.createProject),
        );
        const project = projectJson(out.project);
        return sendJson(res, 201, project, { Location: `${PROJECTS_PATH}/${project.id}` });
      }
      return methodNotAllowed(res, req.method, "GET, POST");
    }
    noQuery(url.search);
    if (sub === undefined) {
      if (req.method !== "GET") return methodNotAllowed(res, req.method, "GET");
      const out = await this.projects.getProject(create(GetProjectRequestSchema, { projectId: id }), ctx(p.getProject));
      return sendJson(res, 200, projectJson(out.project));
    }
    if (sub === "environments" && subId === undefined) {
      if (req.method === "GET") {
        const out = await this.projects.listEnvironments(
          create(ListEnvironmentsRequestSchema, { projectId: id }),
          ctx(p.listEnvironments),
        );
        return sendJson(res, 200, { environments: out.environments.map(environmentJson) });
      }
      if (req.method === "POST") {
        const body = await jsonBody(req, MAX_BODY, "environment", ["name"]);
        const out = await this.projects.createEnvironment(
          create(CreateEnvironmentRequestSchema, { projectId: id, name: stringField(body, "name", true) }),
          ctx(p.createEnvironment),
        );
        const environment = environmentJson(out.environment);
        return sendJson(res, 201, environment, {
          Location: `${PROJECTS_PATH}/${id}/environments/${environment.id}`,
        });
      }
      return methodNotAllowed(res, req.method, "GET, POST");
    }
    if (sub === "environments" && subId !== undefined) {
      if (req.method !== "GET") return methodNotAllowed(res, req.method, "GET");
      const out = await this.projects.getEnvironment(
        create(GetEnvironmentRequestSchema, { projectId: id, environmentId: subId }),
        ctx(p.getEnvironment),
      );
      return sendJson(res, 200, environmentJson(out.environment));
    }
    if (sub === "promotions" && subId === undefined) {
      if (req.method !== "POST") return methodNotAllowed(res, req.method, "POST");
      return this.promote(req, res, id, ctx(p.promote));
    }
    throw new NotFoundError(`no such endpoint: ${url.pathname}`);
  }

  private async promote(req: RestRequest, res: RestResponse, projectId: string, ctx: HandlerContext) {
    const body = await jsonBody(req, MAX_PROMOTION_BODY, "promotion", [
      "fromEnvironmentID",
      "toEnvironmentID",
      "resources",
    ]);
    const listed = body.resources ?? [];
    if (!Array.isArray(listed)) throw new BadRequestError("resources must be an array of paths or {path, ifMatch}");
    const resources = listed.map((item: unknown) => {
      if (typeof item === "string") return { path: item, ifMatch: "" };
      if (typeof item === "object" && item !== null && !Array.isArray(item)) {
        const object = checkedObject(item, "promoted resource", ["path", "ifMatch"]);
        return { path: stringField(object, "path", true), ifMatch: stringField(object, "ifMatch", false) };
      }
      throw new BadRequestError(`resources: ${quoteValue(item)} is neither a path nor {path, ifMatch}`);
    });
    const out = await this.projects.promote(
      create(PromoteRequestSchema, {
        projectId,
        fromEnvironmentId: stringField(body, "fromEnvironmentID", true),
        toEnvironmentId: stringField(body, "toEnvironmentID", true),
        resources,
      }),
      ctx,
    );
    const results = out.resources.map((r) =>
      r.error === ""
        ? { path: r.path, tag: r.tag }
        : { path: r.path, status: statusOf(codeError(r.code, r.error), INSIGHTS_STATUS), error: r.error },
    );
    const first = out.resources[0];
    if (out.promotedCount === 0 && first !== undefined) {
      // Nothing promoted: answer as a write of the first resource would have, with every reason.
      const reasons = out.resources.map((r) => `${r.path}: ${r.error}`).join("; ");
      throw codeError(first.code, `nothing promoted: ${reasons}`);
    }
    sendJson(res, 200, {
      promotedDate: iso(out.promotedDate),
      promotedBy: out.promotedBy,
      promoted: out.promotedCount,
      failed: out.failedCount,
      resources: results,
    });
  }

  private async reportRoutes(
    req: RestRequest,
    res: RestResponse,
    url: RequestUrl,
    id: string | undefined,
    sub: string | undefined,
    subId: string | undefined,
    rest: string[],
  ): Promise<void> {
    const r = ReportService.method;
    const ctx = (m: DescMethod) => this.context(req, res, ReportService, m);
    if (subId !== undefined || rest.length > 0 || id === "")
      throw new NotFoundError(`no such endpoint: ${url.pathname}`);
    if (id === undefined && req.method === "GET") {
      const query = queryObject(url.search);
      for (const name of Object.keys(query)) {
        if (name !== "projectID" && name !== "environmentID") {
          throw new BadRequestError(`unknown query parameter ${name}: use projectID and environmentID`);
        }
      }
      const out = await this.reports.listReports(
        create(ListReportsRequestSchema, {
          projectId: single(query, "projectID") ?? "",
          environmentId: single(query, "environmentID") ?? "",
        }),
        ctx(r.listReports),
      );
      return sendJson(res, 200, { reports: out.reports.map(statusJson) });
    }
    if (id === undefined) {
      if (req.method !== "POST") return methodNotAllowed(res, req.method, "GET, POST");
      noQuery(url.search);
      const body = await jsonBody(req, MAX_BODY, "report request", [
        "projectID",
        "environmentID",
        "additionalFields",
        "asOf",
      ]);
      const fields = body.additionalFields ?? [];
      if (!Array.isArray(fields) || fields.some((f) => typeof f !== "string")) {
        throw new BadRequestError(`additionalFields must be an array of strings, not ${quoteValue(fields)}`);
      }
      const projectId = stringField(body, "projectID", false);
      const environmentId = stringField(body, "environmentID", false);
      const asOf = momentField(body, "asOf");
      const out = await this.reports.createReport(
        create(CreateReportRequestSchema, { projectId, environmentId, additionalFields: fields as string[], asOf }),
        ctx(r.createReport),
      );
      const reportId = out.reportId[0] ?? "";
      return sendJson(
        res,
        202,
        { reportID: out.reportId },
        {
          Location: `${REPORTS_PATH}/${reportId}?projectID=${projectId.toLowerCase()}&environmentID=${environmentId.toLowerCase()}`,
        },
      );
    }
    if (req.method !== "GET" && req.method !== "HEAD") return methodNotAllowed(res, req.method, "GET, HEAD");
    const extra: Record<string, readonly string[]> = {
      "": ["wait"],
      document: [],
      dependencies: ["path"],
      dependents: ["path"],
      unused: [],
      "missing-references": [],
      cycles: [],
      graph: ["format", "root"],
    };
    const allowed = extra[sub ?? ""];
    if (allowed === undefined) throw new NotFoundError(`no such endpoint: ${url.pathname}`);
    const query = queryObject(url.search);
    const input = parseGetReportInput({ ...query, reportID: id }, allowed);
    const key = create(ReportKeySchema, {
      reportId: input.reportID,
      projectId: input.projectID,
      environmentId: input.environmentID,
    });
    switch (sub) {
      case undefined: {
        const wait = single(query, "wait");
        if (wait === undefined) {
          const out = await this.reports.getReport(create(GetReportRequestSchema, { key }), ctx(r.getReport));
          return sendJson(res, 200, statusJson(out.status));
        }
        if (!/^\d{1,5}(\.\d{1,3})?$/.test(wait)) {
          throw new BadRequestError(`wait must be a number of seconds, not ${quoteValue(wait)}`);
        }
        // The watch, for at most `wait` seconds: its last status is the answer.
        const ms = Math.min(Number(wait), MAX_WAIT_SECONDS) * 1000;
        const watch = this.context(req, res, ReportService, r.watchReport, ms);
        let status: ReportStatus | undefined;
        try {
          for await (const m of this.reports.watchReport(create(WatchReportRequestSchema, { key }), watch)) {
            status = m.status;
          }
        } catch (err) {
          // The wait ran out (or the client left): the last status seen is the answer.
          if (!watch.signal.aborted || status === undefined) throw err;
        }
        if ((res as { destroyed: boolean }).destroyed) return;
        return sendJson(res, 200, statusJson(status));
      }
      case "document":
        return this.document(req, res, key, ctx(r.getReportDocument));
      case "dependencies":
      case "dependents": {
        const path = single(query, "path") ?? "";
        const request = { key, path };
        const out =
          sub === "dependencies"
            ? await this.reports.getDependencies(create(GetDependenciesRequestSchema, request), ctx(r.getDependencies))
            : await this.reports.getDependents(create(GetDependentsRequestSchema, request), ctx(r.getDependents));
        return sendJson(res, 200, {
          resource: out.resource,
          direct: out.direct.map(relatedJson),
          all: out.all.map(relatedJson),
        });
      }
      case "unused": {
        const out = await this.reports.listUnusedResources(
          create(ListUnusedResourcesRequestSchema, { key }),
          ctx(r.listUnusedResources),
        );
        return sendJson(res, 200, { resources: out.resources.map((u) => ({ path: u.path, type: u.type })) });
      }
      case "missing-references": {
        const out = await this.reports.listMissingReferences(
          create(ListMissingReferencesRequestSchema, { key }),
          ctx(r.listMissingReferences),
        );
        const references = out.references.map((m) => ({
          path: m.path,
          kind: m.kind,
          name: m.name,
          relativePath: m.relativePath,
          absolutePath: m.absolutePath,
        }));
        return sendJson(res, 200, { references });
      }
      case "cycles": {
        const out = await this.reports.listCycles(create(ListCyclesRequestSchema, { key }), ctx(r.listCycles));
        return sendJson(res, 200, { cycles: out.cycles.map((c) => ({ resources: c.resources, cycle: c.cycle })) });
      }
      case "graph": {
        const format = single(query, "format");
        if (format !== "dot" && format !== "mermaid") {
          throw new BadRequestError(`format must be dot or mermaid, not ${quoteValue(format ?? "")}`);
        }
        const out = await this.reports.exportGraph(
          create(ExportGraphRequestSchema, {
            key,
            format: format === "dot" ? GraphFormat.DOT : GraphFormat.MERMAID,
            root: single(query, "root") ?? "",
          }),
          ctx(r.exportGraph),
        );
        const type = format === "dot" ? "text/vnd.graphviz; charset=utf-8" : "text/plain; charset=utf-8";
        return send(res, 200, { "Content-Type": type, ...NO_STORE }, out.text);
      }
    }
  }

  /** The report document, streamed from the storage; conditional on its ETag (the report never changes). */
  private async document(req: RestRequest, res: RestResponse, key: ReportKey, ctx: HandlerContext): Promise<void> {
    const report = await this.reports.generatedReport(key, ctx);
    const tag = `"${report.id}"`;
    const maxAge = this.reports.secondsLeft(report);
    const headers = { ETag: tag, "Cache-Control": `private, max-age=${maxAge}` };
    const ifNoneMatch = header(req, "if-none-match");
    if (
      ifNoneMatch !== undefined &&
      (ifNoneMatch.trim() === "*" || ifNoneMatch.split(",").some((t) => t.trim().replace(/^W\//, "") === tag))
    ) {
      return send(res, 304, headers);
    }
    const size = report.document?.size;
    start(res, 200, {
      "Content-Type": JSON_TYPE,
      ...headers,
      ...(size !== undefined ? { "Content-Length": size } : {}),
    });
    if (req.method === "HEAD") {
      (res as { end(): void }).end();
      return;
    }
    for await (const chunk of this.reports.documentBytes(report)) {
      if (ctx.signal.aborted) return;
      await write(res, chunk);
    }
    (res as { end(): void }).end();
  }
}
/** The error a promotion result's code and reason stand for. */
function codeError(code: string, reason: string): ConnectError {
  return new ConnectError(reason, codeFromString(code) ?? Code.Unknown);
}
