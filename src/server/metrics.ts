// Prometheus metrics of one server (docs/operations.md, "Metrics"): requests by face, route or RPC
// method and status; requests in flight; armed long polls and watch streams; committed changes;
// storage latency; report jobs; token verifications; the process defaults; build information.
// Served by GET /metrics in the Prometheus text format. Every label has a bounded set of values:
// never a store name, a resource path or an id.

import type { ServerResponse } from "node:http";
import type { ServerHttp2Stream } from "node:http2";
import { codeFromHttpStatus, codeFromString } from "@connectrpc/connect/protocol-connect";
import {
  AggregatorRegistry,
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  type Metric,
  Registry,
} from "prom-client";
import type { Authenticator, TokenCheck } from "../auth/verifier.js";
import { type RestResponse, sendText } from "../rest/http.js";
import { dropUnreadBody, type RpcProtocol } from "../rpc/refusals.js";
import type { ChangeNotifier } from "../services/change-notifier.js";
import type { ReportNotifier } from "../services/report-notifier.js";
import type { ReportJobObserver, ReportJobOutcome } from "../services/report-worker.js";
import type { SkipReason } from "../storage/filesystem/reconciler.js";
import type { ScanSummary } from "../storage/filesystem/scanner.js";
import { TROVE_VERSION } from "../version.js";
import type { OpenRoute } from "./faces.js";
import type { LongLivedBudget } from "./fair-share.js";
import { LIMIT_NAMES, type LimitObserver } from "./limits.js";
import type { StorageObserver } from "./metrics-storage.js";
import type { ObservedResponse, RequestObserver } from "./pipeline.js";
import { FACES, type Face, routeOf } from "./routes.js";

/** gRPC's names of the status codes, by number. */
const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

function codeName(code: number): string {
  return CODE_NAMES[code] ?? "UNKNOWN";
}

/** The answer of a request that ended before it was complete. */
const ABORTED = "aborted";

/**
 * The status of a request once it is over: the HTTP status for REST and other paths ("aborted" when
 * the answer was never completed); for RPC what `rpcStatusReader` set up reads.
 */
function statusOf(res: ObservedResponse): string {
  if (res.outcome !== undefined) return res.outcome();
  return res.writableEnded ? String(res.statusCode) : ABORTED;
}

/**
 * Reads the status of an RPC once it is over: the code's gRPC name, from the grpc-status header or
 * trailer (gRPC), the trailer frame (gRPC-Web), the end-stream message (Connect streaming) or the
 * error body (Connect unary; HTTP 200 is OK). An RPC that ended without any status was cancelled.
 */
function rpcStatusReader(protocol: RpcProtocol, res: RestResponse): () => string {
  const headerStatus = () => {
    const value = res.getHeader("grpc-status");
    return value === undefined ? undefined : codeName(Number(value));
  };
  const fallback = () => (res.writableEnded ? codeName(codeFromHttpStatus(res.statusCode)) : "CANCELLED");
  if (protocol === "grpc") {
    const stream = (res as { stream?: ServerHttp2Stream }).stream;
    return () => {
      const value = stream?.sentTrailers?.["grpc-status"] ?? stream?.sentHeaders?.["grpc-status"];
      if (value !== undefined) return codeName(Number(value));
      return headerStatus() ?? fallback();
    };
  }
  let seen: string | undefined;
  if (protocol === "grpc-web") {
    observeBody(res, (chunk) => {
      const text = endOfStream(chunk, 0x80);
      const m = text === undefined ? null : /grpc-status:\s*(\d+)/i.exec(text);
      if (m) seen = codeName(Number(m[1]));
    });
    return () => seen ?? headerStatus() ?? fallback();
  }
  if (protocol === "connect-stream") {
    observeBody(res, (chunk) => {
      const text = endOfStream(chunk, 0x02);
      if (text !== undefined) seen = connectCode(text, "OK");
    });
    return () => seen ?? fallback();
  }
  // Connect unary: the error's code is in its JSON body.
  const body: Uint8Array[] = [];
  let size = 0;
  observeBody(res, (chunk) => {
    if (res.statusCode !== 200 && size < 16 * 1024) {
      body.push(chunk);
      size += chunk.byteLength;
    }
  });
  return () => {
    if (!res.writableEnded) return "CANCELLED";
    if (res.statusCode === 200) return "OK";
    return connectCode(Buffer.concat(body).toString("utf8"), undefined) ?? fallback();
  };
}

/** The payload of an envelope (5-byte prefix) with `flag` set that is the whole chunk, as text. */
function endOfStream(chunk: Uint8Array, flag: number): string | undefined {
  if (chunk.byteLength < 5 || ((chunk[0] as number) & flag) !== flag) return undefined;
  const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (view.getUint32(1) !== chunk.byteLength - 5) return undefined;
  return Buffer.from(chunk.buffer, chunk.byteOffset + 5, chunk.byteLength - 5).toString("utf8");
}

/** The code of a Connect error in JSON (`{"code": "not_found"}` or `{"error": {"code": ...}}`). */
function connectCode(json: string, none: string | undefined): string | undefined {
  try {
    const value = JSON.parse(json) as { code?: unknown; error?: { code?: unknown } };
    const code = value.error?.code ?? value.code;
    if (code === undefined) return none;
    const known = typeof code === "string" ? codeFromString(code) : undefined;
    return known === undefined ? "UNKNOWN" : codeName(known);
  } catch {
    return undefined;
  }
}

type Method = (...args: unknown[]) => unknown;

/** Shows `look` every chunk of the response body as it is written (once, also through `end`). */
function observeBody(res: RestResponse, look: (chunk: Uint8Array) => void): void {
  const r = res as unknown as { write: Method; end: Method };
  const write = r.write;
  const end = r.end;
  let ending = false;
  const chunkOf = (value: unknown) =>
    value instanceof Uint8Array ? value : typeof value === "string" ? Buffer.from(value) : undefined;
  r.write = function (this: unknown, ...args: unknown[]) {
    const chunk = ending ? undefined : chunkOf(args[0]);
    if (chunk) look(chunk);
    return write.apply(this, args);
  };
  r.end = function (this: unknown, ...args: unknown[]) {
    const chunk = chunkOf(args[0]);
    if (chunk) look(chunk);
    // HTTP/2's end writes its chunk through write: seen once.
    ending = true;
    try {
      return end.apply(this, args);
    } finally {
      ending = false;
    }
  };
}

/** The series of requests with one set of labels: their count (trove_requests_total) and their durations. */
interface RequestSeries {
  readonly labels: { face: Face; route: string; status: string };
  count: number;
  readonly seconds: HistogramSeries;
}

/** One labelled series of a CountedHistogram: counts per bucket (not cumulative), sum and count. */
interface HistogramSeries {
  readonly labels: Record<string, string>;
  readonly buckets: number[];
  sum: number;
  count: number;
}

interface ExportedValue {
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string>;
  value: number;
  metricName: string;
}

/**
 * A histogram counted in plain numbers on the request path and handed to the registry at each
 * scrape in prom-client's own shape (a metric is anything with `get`; the registry formats it):
 * prom-client's `observe` validates and hashes the labels on every call, about 1 µs of a 4 KiB GET
 * (issue 14). Series are made once per label set (`series`) and kept.
 */
class CountedHistogram {
  readonly type = "histogram";
  readonly aggregator = "sum";
  private readonly all: HistogramSeries[] = [];

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly upperBounds: readonly number[],
  ) {}

  series(labels: Record<string, string>): HistogramSeries {
    const series = { labels, buckets: this.upperBounds.map(() => 0), sum: 0, count: 0 };
    this.all.push(series);
    return series;
  }

  observe(series: HistogramSeries, value: number): void {
    const bounds = this.upperBounds;
    let i = 0;
    while (i < bounds.length && value > (bounds[i] as number)) i++;
    if (i < bounds.length) (series.buckets[i] as number)++;
    series.sum += value;
    series.count += 1;
  }

  reset(): void {
    for (const series of this.all) {
      series.buckets.fill(0);
      series.sum = 0;
      series.count = 0;
    }
  }

  /** What the registry writes in the text format: the labels of each series as shared labels, after `le`. */
  getForPromString(): { name: string; help: string; type: string; aggregator: string; values: ExportedValue[] } {
    const values: ExportedValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const series of this.all) {
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += series.buckets[i] as number;
        values.push({ labels: { le }, sharedLabels: series.labels, value: cumulative, metricName: bucket });
      });
      values.push({ labels: { le: "+Inf" }, sharedLabels: series.labels, value: series.count, metricName: bucket });
      values.push({ labels: {}, sharedLabels: series.labels, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: series.labels, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** As prom-client's `get` (getMetricsAsJSON): the shared labels merged into each value's. */
  get(): ReturnType<CountedHistogram["getForPromString"]> {
    const data = this.getForPromString();
    for (const v of data.values) {
      v.labels = { ...v.labels, ...v.sharedLabels };
      delete v.sharedLabels;
    }
    return data;
  }
}

/** Process metrics (CPU, memory, event loop, GC, handles): one set per process, shared by every server in it. */
let processMetrics: Registry | undefined;

function processRegistry(): Registry {
  // collectDefaultMetrics may be called for several registries, but each call starts an event
  // loop monitor and a GC observer that are never stopped: once per process is enough.
  if (processMetrics === undefined) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const STORAGE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const REPORT_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900];

export interface MetricsOptions {
  /** The storage backend's name (build info, storage latency). */
  backend: string;
  /**
   * This server is a worker of `trove serve --workers`: its registry is offered to the primary
   * (prom-client's AggregatorRegistry), and GET /metrics answers `collect()`, every worker's
   * metrics summed by the primary, whichever worker the scrape reaches.
   */
  worker?: { collect(): Promise<string> };
  /** Log lines this process dropped because stdout did not take them (log-destination.ts). */
  logDropped?: () => number;
}

export interface Metrics {
  readonly registry: Registry;
  /** Counts and times every request (a pipeline observer). */
  readonly requests: RequestObserver;
  /** GET /metrics. */
  readonly route: OpenRoute;
  /** Storage latency and committed changes (metrics-storage.ts). */
  readonly storage: StorageObserver;
  /** Report jobs of this instance's worker. */
  readonly reportJobs: ReportJobObserver;
  /** An entry of a filesystem store's folder that is not served (docs/filesystem-stores.md). */
  readonly filesystemSkipped: (reason: SkipReason) => void;
  /** A full scan of a filesystem store's folder made by this instance (its scan lease holder, on MongoDB). */
  readonly filesystemScanned: (summary: ScanSummary) => void;
  /** Reads the armed waiters from the cores at each scrape. */
  watch(cores: { notifier: ChangeNotifier; reportNotifier: ReportNotifier }): void;
  /** Reads the long-lived requests in flight from the budget at each scrape. */
  watchLongLived(budget: LongLivedBudget): void;
  /** Counts a hit of a limit (a connection, a request or a session refused or closed by it). */
  readonly limitHit: LimitObserver;
  /** Counts the token checks of `auth` until `close`. */
  observeAuth(auth: Authenticator | "anonymous"): void;
  close(): void;
}

/** The metrics of one server, in a registry of its own (never prom-client's global one). */
export function createMetrics(options: MetricsOptions): Metrics {
  const registry = new Registry();
  const registers = [registry];
  // The process's metrics are shared objects: getMetricsAsArray returns the metrics themselves.
  for (const metric of processRegistry().getMetricsAsArray()) registry.registerMetric(metric as unknown as Metric);

  new Gauge({
    name: "trove_build_info",
    help: "Always 1: the Trove version, the storage backend and the Node.js version of this server.",
    labelNames: ["version", "backend", "node"],
    registers,
    // Every worker's is the same 1: summed, it would count them.
    aggregator: "max",
  }).set({ version: TROVE_VERSION, backend: options.backend, node: process.version }, 1);
  const logDropped = options.logDropped;
  if (logDropped) {
    new Counter({
      name: "trove_log_lines_dropped_total",
      help: "Log lines dropped because stdout did not take them and the log buffer (--log-buffer) was full.",
      registers,
      collect() {
        this.reset();
        this.inc(logDropped());
      },
    });
  }
  const worker = options.worker;
  if (worker) {
    AggregatorRegistry.setRegistries([registry]);
    // Its constructor adds the listener that answers the primary's requests for this worker's metrics.
    new AggregatorRegistry();
  }
  const collect = worker ? () => worker.collect() : () => registry.metrics();

  // The hottest counts are plain numbers on the request path, handed to prom-client at each
  // scrape: a prom-client update validates and hashes its labels every time (about 2 µs).
  // A series is found by its labels' values one after the other, each a string made once (the route
  // table's labels, the faces, the statuses): no key is built per request (issue 32).
  const series = new Map<string, Map<Face, Map<string, RequestSeries>>>();
  const requestSeriesOf = (face: Face, route: string, status: string): RequestSeries => {
    let byFace = series.get(route);
    if (byFace === undefined) {
      byFace = new Map();
      series.set(route, byFace);
    }
    let byStatus = byFace.get(face);
    if (byStatus === undefined) {
      byStatus = new Map();
      byFace.set(face, byStatus);
    }
    let found = byStatus.get(status);
    if (found === undefined) {
      const labels = { face, route, status };
      found = { labels, count: 0, seconds: requestSeconds.series(labels) };
      byStatus.set(status, found);
    }
    return found;
  };
  const flying = new Map<Face, number>(FACES.map((face) => [face, 0]));
  let hits = 0;
  new Counter({
    name: "trove_requests_total",
    help: "Requests answered, by face, route template or RPC method, and status (HTTP status, or RPC code name).",
    labelNames: ["face", "route", "status"],
    registers,
    collect() {
      this.reset();
      for (const byFace of series.values())
        for (const byStatus of byFace.values())
          for (const { labels, count } of byStatus.values()) this.inc(labels, count);
    },
  });
  const requestSeconds = new CountedHistogram(
    "trove_request_duration_seconds",
    "Time from a request's arrival to the end of its answer (a stream's whole life), by face, route and status.",
    SECONDS_BUCKETS,
  );
  registry.registerMetric(requestSeconds as unknown as Metric);
  new Gauge({
    name: "trove_requests_in_flight",
    help: "Requests arrived and not yet answered completely (long polls and streams included), by face.",
    labelNames: ["face"],
    registers,
    collect() {
      for (const [face, n] of flying) this.set({ face }, n);
    },
  });

  let cores: { notifier: ChangeNotifier; reportNotifier: ReportNotifier } | undefined;
  new Gauge({
    name: "trove_change_waiters",
    help: "Long polls and watch streams armed and waiting for a change of the stores they follow.",
    registers,
    collect() {
      this.set(cores?.notifier.waiterCount ?? 0);
    },
  });
  new Gauge({
    name: "trove_report_watchers",
    help: "Calls waiting for a report's status to change (WatchReport, GET with wait=).",
    registers,
    collect() {
      this.set(cores?.reportNotifier.waiterCount ?? 0);
    },
  });

  let longLived: LongLivedBudget | undefined;
  new Gauge({
    name: "trove_long_lived_requests",
    help: "Long-lived requests in flight (long polls, watches, report downloads, large uploads and downloads): the budget --max-long-lived bounds.",
    registers,
    collect() {
      this.set(longLived?.count ?? 0);
    },
  });
  const limitHits = new Counter({
    name: "trove_limit_refusals_total",
    help: "Connections, requests and sessions refused or closed by a limit (docs/security.md): connections (--max-connections), long_lived (--max-long-lived), long_lived_per_caller, long_lived_unauthenticated, body_rate (--min-body-rate), session_idle (HTTP/2 sessions closed without an open stream), idle_evicted (idle connections closed at --max-connections to admit a new one).",
    labelNames: ["limit"],
    registers,
  });
  for (const limit of LIMIT_NAMES) limitHits.inc({ limit }, 0);

  const changes = new Counter({
    name: "trove_change_events_total",
    help: "Changes committed by this instance's writes: resources created or replaced (put), directories made (mkdir), resources and directories deleted (delete).",
    labelNames: ["kind"],
    registers,
  });
  for (const kind of ["put", "mkdir", "delete"]) changes.inc({ kind }, 0);

  const skipped = new Counter({
    name: "trove_filesystem_skipped_total",
    help: "Entries of filesystem stores' folders that are not served, counted once each: names Trove's path rules refuse (name), symbolic links (link), special files (special).",
    labelNames: ["reason"],
    registers,
  });
  for (const reason of ["name", "link", "special"]) skipped.inc({ reason }, 0);
  const scans = new Counter({
    name: "trove_filesystem_scans_total",
    help: "Full scans of filesystem stores' folders made by this instance (with several instances on MongoDB, only the holder of a store's scan lease scans it).",
    registers,
  });

  // Observed once or more per request too: counted as the request durations are.
  const storageSeconds = new CountedHistogram(
    "trove_storage_operation_duration_seconds",
    "Time of each storage operation (to the first item for listings and reads), by operation, backend and outcome.",
    STORAGE_BUCKETS,
  );
  registry.registerMetric(storageSeconds as unknown as Metric);

  const reportJobs = new Counter({
    name: "trove_report_jobs_total",
    help: "Report jobs this instance's worker took, by outcome: generated, failed, retry, released, lost, error.",
    labelNames: ["outcome"],
    registers,
  });
  for (const outcome of ["generated", "failed", "retry", "released", "lost", "error"]) reportJobs.inc({ outcome }, 0);
  const reportRunning = new Gauge({
    name: "trove_report_jobs_running",
    help: "Report jobs this instance's worker is generating now.",
    registers,
  });
  const reportSeconds = new Histogram({
    name: "trove_report_generation_seconds",
    help: "Time from taking a report job to its end, by outcome.",
    labelNames: ["outcome"],
    buckets: REPORT_BUCKETS,
    registers,
  });

  const verifications = new Counter({
    name: "trove_token_verifications_total",
    help: "Bearer tokens verified (signature, issuer, audience, validity), by result: valid, invalid, unavailable (the issuer's keys could not be fetched), error.",
    labelNames: ["result"],
    registers,
  });
  for (const result of ["valid", "invalid", "unavailable", "error"]) verifications.inc({ result }, 0);
  new Counter({
    name: "trove_token_cache_hits_total",
    help: "Requests whose bearer token was found in the cache of verified tokens (not verified again).",
    registers,
    collect() {
      this.reset();
      this.inc(hits);
    },
  });

  const storageSeries = new Map<string, HistogramSeries>();
  const stops: Array<() => void> = [];

  return {
    registry,
    // Nothing kept per request but the RPC status reader: the face and route are the pipeline's
    // lookup, on the request's record (issue 14: a parked poll holds no closure of the metrics).
    requests: {
      arrived(req, res) {
        res.route ??= routeOf(req);
        const { face, protocol } = res.route;
        if (protocol !== undefined) res.outcome = rpcStatusReader(protocol, res);
        flying.set(face, (flying.get(face) as number) + 1);
      },
      closed(req, res) {
        res.route ??= routeOf(req);
        const { face, route } = res.route;
        flying.set(face, (flying.get(face) as number) - 1);
        const found = requestSeriesOf(face, route, statusOf(res));
        found.count += 1;
        requestSeconds.observe(found.seconds, (performance.now() - res.arrived) / 1000);
      },
    },
    route(req, res) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        dropUnreadBody(req, res);
        sendText(res, 405, `${req.method} is not supported here: use GET`, { Allow: "GET, HEAD" });
        return;
      }
      collect().then(
        (text) => {
          const body = Buffer.from(text);
          // Both responses take this call; @types/node 22 cannot unite their overloads.
          (res as ServerResponse).writeHead(200, {
            "Content-Type": registry.contentType,
            "Content-Length": body.byteLength,
            "Cache-Control": "no-store",
          });
          if (req.method === "HEAD") res.end();
          else res.end(body);
        },
        (err: unknown) => sendText(res, 500, `metrics could not be collected: ${(err as Error).message}`),
      );
    },
    storage: {
      operation(name, seconds, ok) {
        const key = ok ? name : `${name} error`;
        let series = storageSeries.get(key);
        if (series === undefined) {
          series = storageSeconds.series({ operation: name, backend: options.backend, outcome: ok ? "ok" : "error" });
          storageSeries.set(key, series);
        }
        storageSeconds.observe(series, seconds);
      },
      changed(kind, count) {
        if (count > 0) changes.inc({ kind }, count);
      },
    },
    reportJobs: {
      started() {
        reportRunning.inc();
      },
      ended(outcome: ReportJobOutcome, seconds) {
        reportRunning.dec();
        reportJobs.inc({ outcome });
        reportSeconds.observe({ outcome }, seconds);
      },
    },
    filesystemSkipped(reason) {
      skipped.inc({ reason });
    },
    filesystemScanned() {
      scans.inc();
    },
    watch(c) {
      cores = c;
    },
    watchLongLived(budget) {
      longLived = budget;
    },
    limitHit(limit) {
      limitHits.inc({ limit });
    },
    observeAuth(auth) {
      if (auth === "anonymous" || auth.observe === undefined) return;
      stops.push(
        auth.observe((check: TokenCheck) => {
          if (check === "cached") hits += 1;
          else verifications.inc({ result: check });
        }),
      );
    },
    close() {
      for (const stop of stops.splice(0)) stop();
    },
  };
}

/** GET /metrics, when metrics are on. */
export function metricsRoutes(metrics: Metrics | undefined): Array<[string, OpenRoute]> {
  return metrics ? [["/metrics", metrics.route]] : [];
}
