// Content insights over REST (/insights/v1): projects, environments, promotion, and reports:
// create (now or as of an earlier moment), status, wait (WatchReport on the gRPC face when
// reachable, long polls otherwise), download, the queries over a generated report, and the
// comparison of two environments or moments. Errors are the SDK's typed errors (403
// ForbiddenError when a permission or project access is missing, 409 ConflictError, 410
// HistoryPurgedError for a moment older than the history kept).

import { createWriteStream } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Auth } from "./auth.js";
import { fromConnectError } from "./connect-errors.js";
import { createRestClient, formatMoment, type Moment, type TroveRestClient } from "./rest/client.js";
import { TroveError } from "./trove-errors.js";

export interface Project {
  id: string;
  name: string;
  account: string;
  store: string;
  created: string;
  creator: string;
}

export interface Environment {
  id: string;
  projectID: string;
  name: string;
  created: string;
  creator: string;
}

export type AdditionalField = "lastPromotedDate" | "lastPromotedBy";

export interface ReportRequest {
  projectID: string;
  environmentID: string;
  additionalFields?: AdditionalField[];
  /**
   * Trove's extension (docs/insights.md): the environment as it was at this moment of the
   * project's store, an event id or a time (a Date, or ISO 8601 with a zone); default now.
   */
  asOf?: Moment;
}

/** What names a report: the three inputs of the spec's "get a report by ID". */
export interface ReportKey {
  reportID: string;
  projectID: string;
  environmentID: string;
}

/** The spec's status record (id and created are arrays of one element); `reason` when failed. */
export interface ReportStatusRecord {
  id: [string];
  creator: string;
  created: [string];
  status: "generating" | "generated" | "failed" | (string & {});
  href?: string;
  reason?: string;
  /** Trove's extension: the event the report describes; absent for a report of the environment as it was generated. */
  asOfEvent?: number;
}

export interface ReferenceEntry {
  name: string;
  relativePath: string;
  absolutePath: string;
  missing?: true;
}

export interface ResourceEntry {
  type: string;
  name: string;
  extension: string;
  path: string;
  created: string;
  lastModified: string;
  size: number;
  tags: Record<string, string>;
  pluggableObjects: ReferenceEntry[];
  contentBlocks: ReferenceEntry[];
  datamodel: ReferenceEntry | null;
  themes: Array<ReferenceEntry & { isDefault: boolean }>;
  lastPromotedDate?: string | null;
  lastPromotedBy?: string | null;
  problems?: string[];
}

export interface ReportDocument {
  version: string;
  created: string;
  creator: string;
  projectID: string;
  projectName: string;
  environmentID: string;
  environmentName: string;
  resources: ResourceEntry[];
}

export interface RelatedResource {
  path: string;
  type: string;
  depth: number;
  missing?: true;
}

export interface RelatedResources {
  resource: string;
  direct: RelatedResource[];
  all: RelatedResource[];
}

export interface MissingReference {
  path: string;
  kind: string;
  name: string;
  relativePath: string;
  absolutePath: string;
}

export interface ReferenceCycle {
  resources: string[];
  cycle: string[];
}

export interface PromoteRequest {
  projectID: string;
  fromEnvironmentID: string;
  toEnvironmentID: string;
  /** Paths within the environment (a directory means every file below it), or {path, ifMatch}; none: everything. */
  resources?: Array<string | { path: string; ifMatch?: string }>;
}

export interface PromoteResult {
  promotedDate: string;
  promotedBy: string;
  promoted: number;
  failed: number;
  resources: Array<{ path: string; tag: string } | { path: string; status: number; error: string }>;
}

/** What to compare (docs/insights.md, Comparing): two sides, each an environment of the project at a moment. */
export interface CompareRequest {
  projectID: string;
  /** The side compared from. */
  environmentID: string;
  /** Its moment; default now. */
  asOf?: Moment;
  /** The side compared to; default the same environment. */
  toEnvironmentID?: string;
  /** Its moment; default now. */
  toAsOf?: Moment;
}

export interface ComparedSide {
  environmentID: string;
  environmentName: string;
  /** The event the side was read at (for now, the store's last event when the comparison began). */
  event: number;
  now: boolean;
}

export interface ResourceDiff {
  change: "added" | "removed" | "changed";
  /** Path within the environment, starting with "/". */
  path: string;
  fromMD5?: string;
  toMD5?: string;
}

export interface ReferenceDiff {
  change: "added" | "removed";
  /** The referring resource. */
  path: string;
  kind: string;
  /** The referenced path. */
  target: string;
  missing?: true;
  isDefault?: true;
}

export interface Comparison {
  from: ComparedSide;
  to: ComparedSide;
  resources: ResourceDiff[];
  references: ReferenceDiff[];
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** Give up (TimeoutError) after this many milliseconds; default: wait as long as it takes. */
  timeoutMs?: number;
  /** "auto" (default): the gRPC WatchReport stream when reachable, long polls otherwise. */
  via?: "auto" | "watch" | "poll";
  /** Called with each status seen. */
  onStatus?: (status: ReportStatusRecord) => void;
}

export interface InsightsClientOptions {
  baseUrl: string;
  auth?: Auth;
  fetch?: typeof fetch;
}

/** A report wait that ran out of time: the last status is attached. */
export class ReportTimeoutError extends Error {
  override name = "ReportTimeoutError";
  constructor(readonly status: ReportStatusRecord) {
    super(`report ${status.id[0]} still ${status.status}`);
  }
}

const JSON_HEADERS = { "Content-Type": "application/json" };

function keyQuery(key: ReportKey, extra: Record<string, string | undefined> = {}): string {
  const params = new URLSearchParams({ projectID: key.projectID, environmentID: key.environmentID });
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) params.set(name, value);
  return `?${params}`;
}

const seg = encodeURIComponent;

/** The insights API of one Trove server. */
export class TroveInsightsClient {
  readonly rest: TroveRestClient;

  constructor(options: InsightsClientOptions | { rest: TroveRestClient }) {
    this.rest = "rest" in options ? options.rest : createRestClient(options);
  }

  private async json<T>(method: string, target: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const res = await this.rest.call({
      method,
      target,
      headers: body === undefined ? {} : JSON_HEADERS,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    return (await res.json()) as T;
  }

  // Projects and environments.

  createProject(input: { name: string; account?: string; store?: string }): Promise<Project> {
    return this.json("POST", "/insights/v1/projects", input);
  }

  async listProjects(): Promise<Project[]> {
    return (await this.json<{ projects: Project[] }>("GET", "/insights/v1/projects")).projects;
  }

  getProject(projectID: string): Promise<Project> {
    return this.json("GET", `/insights/v1/projects/${seg(projectID)}`);
  }

  /** A project by ID, or by name (in the caller's visible projects; `account` narrows it). */
  async findProject(idOrName: string, account?: string): Promise<Project> {
    if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(idOrName)) {
      return this.getProject(idOrName);
    }
    const found = (await this.listProjects()).filter(
      (p) => p.name === idOrName && (account === undefined || p.account === account),
    );
    if (found.length === 1) return found[0] as Project;
    if (found.length === 0) throw new TroveError(404, `no project named ${idOrName}`);
    throw new TroveError(400, `several projects are named ${idOrName}: give the account or the ID`);
  }

  createEnvironment(projectID: string, name: string): Promise<Environment> {
    return this.json("POST", `/insights/v1/projects/${seg(projectID)}/environments`, { name });
  }

  async listEnvironments(projectID: string): Promise<Environment[]> {
    const path = `/insights/v1/projects/${seg(projectID)}/environments`;
    return (await this.json<{ environments: Environment[] }>("GET", path)).environments;
  }

  getEnvironment(projectID: string, environmentID: string): Promise<Environment> {
    return this.json("GET", `/insights/v1/projects/${seg(projectID)}/environments/${seg(environmentID)}`);
  }

  /** An environment of the project by ID or by name. */
  async findEnvironment(projectID: string, idOrName: string): Promise<Environment> {
    const found = (await this.listEnvironments(projectID)).find((e) => e.id === idOrName || e.name === idOrName);
    if (!found) throw new TroveError(404, `no environment ${idOrName} in project ${projectID}`);
    return found;
  }

  promote(request: PromoteRequest): Promise<PromoteResult> {
    const { projectID, ...body } = request;
    return this.json("POST", `/insights/v1/projects/${seg(projectID)}/promotions`, body);
  }

  // Reports.

  /**
   * Requests a report; answers its key (the spec's `reportID` array holds one ID). A malformed
   * `asOf` is a RangeError before anything is sent.
   */
  async createReport(request: ReportRequest): Promise<ReportKey> {
    const { asOf, ...fields } = request;
    const body = asOf === undefined ? fields : { ...fields, asOf: formatMoment(asOf, "asOf") };
    const { reportID } = await this.json<{ reportID: string[] }>("POST", "/insights/v1/reports", body);
    return { reportID: reportID[0] ?? "", projectID: request.projectID, environmentID: request.environmentID };
  }

  /**
   * Compares two sides, each an environment of the project at a moment (now by default): the
   * resources added, removed and changed, and the references added and removed. Nothing is stored.
   */
  compareEnvironments(request: CompareRequest, options: { signal?: AbortSignal } = {}): Promise<Comparison> {
    const query = new URLSearchParams({ projectID: request.projectID, environmentID: request.environmentID });
    if (request.asOf !== undefined) query.set("asOf", formatMoment(request.asOf, "asOf"));
    if (request.toEnvironmentID !== undefined) query.set("toEnvironmentID", request.toEnvironmentID);
    if (request.toAsOf !== undefined) query.set("toAsOf", formatMoment(request.toAsOf, "toAsOf"));
    return this.json("GET", `/insights/v1/comparison?${query}`, undefined, options.signal);
  }

  getReport(key: ReportKey, options: { signal?: AbortSignal } = {}): Promise<ReportStatusRecord> {
    return this.json("GET", `/insights/v1/reports/${seg(key.reportID)}${keyQuery(key)}`, undefined, options.signal);
  }

  async listReports(projectID: string, environmentID: string): Promise<ReportStatusRecord[]> {
    const query = new URLSearchParams({ projectID, environmentID });
    return (await this.json<{ reports: ReportStatusRecord[] }>("GET", `/insights/v1/reports?${query}`)).reports;
  }

  /**
   * Waits until the report is no longer generating and answers its final status (generated or
   * failed: check `status`). Uses the WatchReport stream when the gRPC face is reachable, else
   * REST long polls (`wait=`) with a backoff after errors.
   */
  async waitForReport(key: ReportKey, options: WaitOptions = {}): Promise<ReportStatusRecord> {
    const timeout = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
    const signals = [options.signal, timeout].filter((s): s is AbortSignal => s !== undefined);
    const signal = signals.length > 0 ? AbortSignal.any(signals) : undefined;
    let last: ReportStatusRecord | undefined;
    const seen = (s: ReportStatusRecord) => {
      last = s;
      options.onStatus?.(s);
      return s.status !== "generating";
    };
    const timedOut = () => timeout?.aborted && !options.signal?.aborted;
    try {
      if ((options.via ?? "auto") !== "poll") {
        try {
          const done = await this.watch(key, seen, signal);
          if (done) return last as ReportStatusRecord;
        } catch (err) {
          if (signal?.aborted) throw err;
          if (options.via === "watch") throw fromConnectError(err);
          // Unreachable stream (a proxy without HTTP/2, ...), or an error: the long polls below
          // either work or answer the error in REST's terms (403, 404, ...).
        }
      }
      let delay = 250;
      for (;;) {
        signal?.throwIfAborted();
        try {
          const status = await this.json<ReportStatusRecord>(
            "GET",
            `/insights/v1/reports/${seg(key.reportID)}${keyQuery(key, { wait: "30" })}`,
            undefined,
            signal,
          );
          delay = 250;
          if (seen(status)) return status;
        } catch (err) {
          if (signal?.aborted) throw err;
          // Unreachable or unavailable: back off; any other answer is final.
          if (err instanceof TroveError && err.status !== 0 && err.status !== 503) throw err;
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, 10_000);
        }
      }
    } catch (err) {
      if (timedOut() && last) throw new ReportTimeoutError(last);
      throw err;
    }
  }

  /** Follows WatchReport; true when the report reached a final status. */
  private async watch(
    key: ReportKey,
    seen: (s: ReportStatusRecord) => boolean,
    signal: AbortSignal | undefined,
  ): Promise<boolean> {
    // Loaded on demand: only waits need the gRPC transport.
    const { createTroveClient } = await import("./client.js");
    const { timestampDate } = await import("@bufbuild/protobuf/wkt");
    const client = createTroveClient({ baseUrl: this.rest.baseUrl, auth: this.rest.tokenProvider, protocol: "grpc" });
    const names = ["unspecified", "generating", "generated", "failed"];
    let healthy = true;
    try {
      const request = {
        key: { reportId: key.reportID, projectId: key.projectID, environmentId: key.environmentID },
      };
      for await (const message of client.reports.watchReport(request, { signal })) {
        const s = message.status;
        if (!s) continue;
        const record: ReportStatusRecord = {
          id: [s.id[0] ?? key.reportID],
          creator: s.creator,
          created: [s.created[0] ? timestampDate(s.created[0]).toISOString() : ""],
          status: names[s.state] ?? "unknown",
        };
        if (s.href) record.href = s.href;
        if (s.reason) record.reason = s.reason;
        if (s.asOfEventId) record.asOfEvent = Number(s.asOfEventId);
        if (seen(record)) return true;
      }
      return false;
    } catch (err) {
      // A session that failed at the transport (an HTTP/1.1-only proxy answering the h2
      // preface) is closed already; aborting it again would emit its error with no listener.
      const code = ConnectError.from(err).code;
      healthy = code !== Code.Internal && code !== Code.Unavailable && code !== Code.Unknown;
      throw err;
    } finally {
      if (healthy) client.close();
    }
  }

  /** The report document as parsed JSON. */
  async downloadReport(key: ReportKey, options?: { as?: "json"; signal?: AbortSignal }): Promise<ReportDocument>;
  /** The report document's bytes as a web stream. */
  async downloadReport(
    key: ReportKey,
    options: { as: "stream"; signal?: AbortSignal },
  ): Promise<ReadableStream<Uint8Array>>;
  /** Writes the report document to a file (atomically: a temporary file, then a rename); answers its size. */
  async downloadReport(key: ReportKey, options: { as: "file"; file: string; signal?: AbortSignal }): Promise<number>;
  async downloadReport(
    key: ReportKey,
    options: { as?: "json" | "stream" | "file"; file?: string; signal?: AbortSignal } = {},
  ): Promise<ReportDocument | ReadableStream<Uint8Array> | number> {
    const res = await this.rest.call({
      method: "GET",
      target: `/insights/v1/reports/${seg(key.reportID)}/document${keyQuery(key)}`,
      signal: options.signal,
    });
    if (options.as === "stream") return res.body ?? new ReadableStream({ start: (c) => c.close() });
    if (options.as === "file") {
      const file = options.file as string;
      const temp = `${file}.${process.pid}.tmp`;
      let size = 0;
      try {
        const body = Readable.fromWeb((res.body ?? new ReadableStream()) as import("node:stream/web").ReadableStream);
        body.on("data", (chunk: Buffer) => {
          size += chunk.byteLength;
        });
        await pipeline(body, createWriteStream(temp));
        await rename(temp, file);
      } catch (err) {
        await rm(temp, { force: true });
        throw err;
      }
      return size;
    }
    return (await res.json()) as ReportDocument;
  }

  dependencies(key: ReportKey, path: string): Promise<RelatedResources> {
    return this.json("GET", `/insights/v1/reports/${seg(key.reportID)}/dependencies${keyQuery(key, { path })}`);
  }

  dependents(key: ReportKey, path: string): Promise<RelatedResources> {
    return this.json("GET", `/insights/v1/reports/${seg(key.reportID)}/dependents${keyQuery(key, { path })}`);
  }

  async unusedResources(key: ReportKey): Promise<Array<{ path: string; type: string }>> {
    const target = `/insights/v1/reports/${seg(key.reportID)}/unused${keyQuery(key)}`;
    return (await this.json<{ resources: Array<{ path: string; type: string }> }>("GET", target)).resources;
  }

  async missingReferences(key: ReportKey): Promise<MissingReference[]> {
    const target = `/insights/v1/reports/${seg(key.reportID)}/missing-references${keyQuery(key)}`;
    return (await this.json<{ references: MissingReference[] }>("GET", target)).references;
  }

  async cycles(key: ReportKey): Promise<ReferenceCycle[]> {
    const target = `/insights/v1/reports/${seg(key.reportID)}/cycles${keyQuery(key)}`;
    return (await this.json<{ cycles: ReferenceCycle[] }>("GET", target)).cycles;
  }

  /** The dependency graph as Graphviz DOT or Mermaid text; `root` limits it to one resource and what it uses. */
  async graph(key: ReportKey, options: { format: "dot" | "mermaid"; root?: string }): Promise<string> {
    const res = await this.rest.call({
      method: "GET",
      target: `/insights/v1/reports/${seg(key.reportID)}/graph${keyQuery(key, { format: options.format, root: options.root })}`,
    });
    return res.text();
  }
}

export function createInsightsClient(options: InsightsClientOptions | { rest: TroveRestClient }): TroveInsightsClient {
  return new TroveInsightsClient(options);
}
