// The one route table of the server (issue 32): every path a request can take, REST v2 and v1, the
// insights REST routes, the open paths (probes, metrics, the API description, the console), the
// development issuer and every RPC service. A request is looked up once, where it enters the
// pipeline; its face, route and protocol then travel on its record, and dispatch, authentication,
// metrics and the request log read them. Adding a route is one row below.

import type { DescService } from "@bufbuild/protobuf";
import { BackupService } from "@trove/sdk/gen/trove/admin/v1/backup_pb.js";
import { ProjectService } from "@trove/sdk/gen/trove/insights/v1/projects_pb.js";
import { ReportService } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { DEV_ISSUER_PREFIX } from "../auth/dev-issuer.js";
import type { RestRequest } from "../rest/http.js";
import { INSIGHTS_PREFIX } from "../rest/insights.js";
import { POLL_PATH } from "../rest/poll.js";
import { DATA_PREFIX } from "../rest/resources.js";
import { REST_PREFIX, type RestRoute } from "../rest/router.js";
import { STORES_PATH } from "../rest/stores.js";
import type { ApiVersion } from "../rest/version.js";
import { type RpcProtocol, rpcProtocol } from "../rpc/refusals.js";
import { CONSOLE_PREFIX } from "./console.js";
import { OPENAPI_PATH } from "./openapi.js";

/** The face a request is counted under (metrics' `face` label). */
export type Face = "rest" | "connect" | "grpc" | "grpc-web" | "other";

export const FACES: readonly Face[] = ["rest", "connect", "grpc", "grpc-web", "other"];

/** Who answers a request: the REST routes, the insights routes, an open HTTP route, the issuer, or Connect. */
export type Target = "rest" | "insights" | "open" | "issuer" | "rpc";

/** The label value of every route, method or path outside the known sets. */
export const UNKNOWN = "unknown";

/** What the lookup decides of a request, once; it travels on the request's record (RequestRecord.route). */
export interface RequestRoute {
  readonly face: Face;
  /** Route template ("GET /resources/v2/stores/{store}"), RPC method ("package.Service/Method"), or "unknown". */
  readonly route: string;
  /** The RPC protocol the call speaks (how its status is read and a refusal answered); undefined for HTTP. */
  readonly protocol: RpcProtocol | undefined;
  readonly target: Target;
  /** Answered without a token (DESIGN.md, "Second wave"). */
  readonly open: boolean;
  /** What the request may be of long-lived work (fair-share.ts); undefined: always short. */
  readonly longLived: LongLivedKind | undefined;
  /** REST's routes and version for the path (rest/router.ts); undefined: no REST resources route. */
  readonly rest: RestRoute | undefined;
}

/**
 * What a route may be of long-lived work (docs/security.md, "Fair share"), decided with the route:
 * - "always": an RPC wait, watch, upload stream or report document, a REST report document;
 * - "poll": a REST poll, long-lived when it has cursors (`store=`), else it answers at once;
 * - "report-wait": a REST report status, long-lived with `wait=`;
 * - "upload": a REST PUT or POST under /resources/, long-lived at LARGE_TRANSFER_BYTES or of unknown length;
 * - "download": a read of contents (a REST GET of data, an RPC Read), long-lived once the core
 *   learns its size is large (claimLargeTransfer).
 */
export type LongLivedKind = "always" | "poll" | "report-wait" | "upload" | "download";

/** The RPC services of Trove, in the order they are registered: a token is needed for each. */
export const TROVE_SERVICES = [
  ResourceService,
  StoreService,
  ChangeService,
  ProjectService,
  ReportService,
  BackupService,
] as const;

/** Standard RPC services registered beside Trove's, open to every caller: their methods. */
const OPEN_RPC_METHODS = [
  "grpc.health.v1.Health/Check",
  "grpc.health.v1.Health/Watch",
  "grpc.health.v1.Health/List",
  "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
  "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/** RPC methods that last as long as the client likes (waits, watches) or as the data (report documents, uploads). */
const LONG_LIVED_METHODS: ReadonlyMap<string, LongLivedKind> = new Map([
  ["trove.resources.v2.ChangeService/Poll", "always"],
  ["trove.resources.v2.ChangeService/WatchChanges", "always"],
  ["trove.resources.v2.ResourceService/Write", "always"],
  ["trove.insights.v1.ReportService/WatchReport", "always"],
  ["trove.insights.v1.ReportService/GetReportDocument", "always"],
  ["grpc.health.v1.Health/Watch", "always"],
  ["grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "always"],
  ["grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "always"],
  // Long-lived when the resource is large, which the core learns when it reads the node.
  ["trove.resources.v2.ResourceService/Read", "download"],
  ["trove.resources.v2.ResourceService/ReadMany", "download"],
  // One message, long-lived as a REST upload of its length is (1 MiB or more, or of unknown length).
  ["trove.resources.v2.ResourceService/WriteMany", "upload"],
]);

const methodsOf = (service: DescService) => service.methods.map((method) => `${service.typeName}/${method.name}`);

/** Every RPC method label: `package.Service/Method`. */
export const RPC_METHODS: ReadonlySet<string> = new Set([...TROVE_SERVICES.flatMap(methodsOf), ...OPEN_RPC_METHODS]);

/** HTTP methods a route label may carry; any other makes the route unknown (HTTP/2 lets any token through). */
const HTTP_METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PATCH"] as const;

const REPORT_VIEWS = ["document", "dependencies", "dependents", "unused", "missing-references", "cycles", "graph"];

/**
 * A row of the table. `path` is matched exactly, `prefix` as the start of the path; a `template`
 * of `{name}` segments matches one non-empty segment each. `label` (default true) says whether its
 * metrics label is `METHOD template`; unlabelled rows count as "unknown".
 */
interface Row {
  target: Target;
  open?: boolean;
  path?: string;
  prefix?: string;
  template?: string;
  /** The label's template when not the path, prefix or template itself. */
  labelAs?: string;
  label?: boolean;
  /** What each HTTP method of the row may be of long-lived work. */
  longLived?: Partial<Record<(typeof HTTP_METHODS)[number], LongLivedKind>>;
  /** The REST routes that answer the row, any method (an unknown one is their 405). */
  rest?: RestRoute;
}

/** Any PUT or POST under /resources/ is an upload, long-lived when large (a row's or an unknown path's). */
const UPLOADS = { PUT: "upload", POST: "upload" } as const;

/** REST v2's resource routes; version 1 has the same ones under its own prefix (src/rest/version.ts). */
const RESOURCE_ROWS = (version: ApiVersion): Row[] => {
  const at = (path: string) => path.replace("/resources/v2/", `/resources/v${version}/`);
  const stores: RestRoute = { routes: "stores", version };
  return [
    {
      target: "rest",
      prefix: at(DATA_PREFIX),
      labelAs: at(`${DATA_PREFIX}{store}/{path}`),
      longLived: { GET: "download", ...UPLOADS },
      rest: { routes: "resources", version },
    },
    { target: "rest", path: at(STORES_PATH), longLived: UPLOADS, rest: stores },
    {
      target: "rest",
      prefix: at(`${STORES_PATH}/`),
      labelAs: at(`${STORES_PATH}/{store}`),
      longLived: UPLOADS,
      rest: stores,
    },
    { target: "rest", path: at(POLL_PATH), longLived: { GET: "poll", ...UPLOADS }, rest: { routes: "poll", version } },
  ];
};

const PROJECTS = `${INSIGHTS_PREFIX}projects`;
const REPORTS = `${INSIGHTS_PREFIX}reports`;

/** The table. Paths under REST_PREFIX and INSIGHTS_PREFIX without a row are REST's "no such endpoint". */
const ROWS: readonly Row[] = [
  ...RESOURCE_ROWS(2),
  ...RESOURCE_ROWS(1),
  { target: "insights", template: PROJECTS },
  { target: "insights", template: `${PROJECTS}/{project}` },
  { target: "insights", template: `${PROJECTS}/{project}/environments` },
  { target: "insights", template: `${PROJECTS}/{project}/environments/{environment}` },
  { target: "insights", template: `${PROJECTS}/{project}/promotions` },
  { target: "insights", template: REPORTS },
  { target: "insights", template: `${REPORTS}/{report}`, longLived: { GET: "report-wait" } },
  ...REPORT_VIEWS.map(
    (view): Row => ({
      target: "insights",
      template: `${REPORTS}/{report}/${view}`,
      longLived: view === "document" ? { GET: "always" } : undefined,
    }),
  ),
  // Open HTTP routes (their handlers: health.ts, metrics.ts, openapi.ts, console.ts).
  { target: "open", open: true, path: "/healthz" },
  { target: "open", open: true, path: "/readyz" },
  { target: "open", open: true, path: "/metrics" },
  { target: "open", open: true, path: OPENAPI_PATH },
  { target: "open", open: true, path: "/", label: false },
  { target: "open", open: true, path: "/console", label: false },
  { target: "open", open: true, prefix: CONSOLE_PREFIX, label: false },
  // The development issuer: open in development mode only (the pipeline answers it when there is one;
  // without one, its paths need a token and answer 404).
  { target: "issuer", prefix: DEV_ISSUER_PREFIX, labelAs: `${DEV_ISSUER_PREFIX}{endpoint}` },
  // RPC services: Trove's need a token, the standard health and reflection services do not.
  ...TROVE_SERVICES.map((service): Row => ({ target: "rpc", prefix: `/${service.typeName}/`, label: false })),
  ...[...new Set(OPEN_RPC_METHODS.map((m) => m.slice(0, m.indexOf("/") + 1)))].map(
    (service): Row => ({ target: "rpc", open: true, prefix: `/${service}`, label: false }),
  ),
];

/** A row with its answers made once, by HTTP method: looking a request up allocates nothing. */
interface CompiledRow {
  row: Row;
  segments: string[] | undefined;
  byMethod: Map<string, RequestRoute>;
  unlabelled: RequestRoute;
}

function faceOf(target: Target): Face {
  return target === "rest" || target === "insights" ? "rest" : target === "rpc" ? "connect" : "other";
}

function compile(row: Row): CompiledRow {
  const face = faceOf(row.target);
  const template = row.labelAs ?? row.path ?? row.template ?? row.prefix ?? "";
  const protocol = row.target === "rpc" ? ("connect" as const) : undefined;
  const answer = (route: string, longLived?: LongLivedKind): RequestRoute => ({
    face,
    route,
    protocol,
    target: row.target,
    open: row.open === true,
    longLived,
    rest: row.rest,
  });
  const byMethod = new Map<string, RequestRoute>();
  if (row.label !== false) {
    for (const method of HTTP_METHODS) byMethod.set(method, answer(`${method} ${template}`, row.longLived?.[method]));
  }
  return { row, segments: row.template?.split("/"), byMethod, unlabelled: answer(UNKNOWN) };
}

const COMPILED = ROWS.map(compile);
const EXACT = new Map(COMPILED.filter((c) => c.row.path !== undefined).map((c) => [c.row.path as string, c]));
const PREFIXED = COMPILED.filter((c) => c.row.prefix !== undefined);
const TEMPLATED = COMPILED.filter((c) => c.segments !== undefined);

function matches(segments: readonly string[], path: string): boolean {
  const parts = path.split("/");
  if (parts.length !== segments.length) return false;
  for (let i = 0; i < parts.length; i++) {
    const want = segments[i] as string;
    const part = parts[i] as string;
    if (want.startsWith("{") ? part === "" : part !== want) return false;
  }
  return true;
}

function rowOf(path: string): CompiledRow | undefined {
  const exact = EXACT.get(path);
  if (exact) return exact;
  for (const c of PREFIXED) if (path.startsWith(c.row.prefix as string)) return c;
  if (path.startsWith(INSIGHTS_PREFIX)) for (const c of TEMPLATED) if (matches(c.segments as string[], path)) return c;
  return undefined;
}

const REST_UNKNOWN: RequestRoute = {
  face: "rest",
  route: UNKNOWN,
  protocol: undefined,
  target: "rest",
  open: false,
  longLived: undefined,
  rest: undefined,
};
/** An unknown path under /resources/, by method: its PUT and POST still count as uploads. */
const REST_UNKNOWN_BY_METHOD = new Map(
  Object.entries(UPLOADS).map(([method, longLived]) => [method, { ...REST_UNKNOWN, longLived }]),
);
const INSIGHTS_UNKNOWN: RequestRoute = { ...REST_UNKNOWN, target: "insights" };
const OTHER_UNKNOWN: RequestRoute = { ...REST_UNKNOWN, face: "other", target: "rpc" };

/** The path of a request target, without its query. */
function pathOf(url: string): string {
  const query = url.indexOf("?");
  return query < 0 ? url : url.slice(0, query);
}

/** Looks a request up in the table: its face, route, protocol, who answers it and whether it needs a token. */
export function routeOf(req: RestRequest): RequestRoute {
  const path = pathOf(req.url ?? "/");
  const method = req.method ?? "";
  const found = rowOf(path);
  // REST and insights paths are REST's, whatever their content type: an unknown one is its 404.
  // (A row's method outside HTTP_METHODS is still its routes' to answer, 405, counted as unknown.)
  if (path.startsWith(REST_PREFIX))
    return found?.byMethod.get(method) ?? found?.unlabelled ?? REST_UNKNOWN_BY_METHOD.get(method) ?? REST_UNKNOWN;
  if (path.startsWith(INSIGHTS_PREFIX)) return found?.byMethod.get(method) ?? INSIGHTS_UNKNOWN;
  const target = found?.row.target ?? "rpc";
  const open = found?.row.open === true;
  const protocol = rpcProtocol(req);
  if (protocol !== undefined) {
    const face = protocol === "grpc" || protocol === "grpc-web" ? protocol : "connect";
    return rpcRoute(face, path, protocol, target, open);
  }
  if (found === undefined) return OTHER_UNKNOWN;
  if (target === "rpc") {
    // A call to a Trove service that no protocol claims is refused or answered as Connect unary;
    // one to an open service is no RPC at all (Connect answers it 404).
    return open
      ? { ...OTHER_UNKNOWN, open, longLived: LONG_LIVED_METHODS.get(path.slice(1)) }
      : rpcRoute(found.unlabelled.face, path, found.unlabelled.protocol, target, open);
  }
  return found.byMethod.get(method) ?? found.unlabelled;
}

/** The answer for an RPC path (`/package.Service/Method`): its method's label and long-lived kind. */
function rpcRoute(
  face: Face,
  path: string,
  protocol: RpcProtocol | undefined,
  target: Target,
  open: boolean,
): RequestRoute {
  const name = path.slice(1);
  return {
    face,
    route: RPC_METHODS.has(name) ? name : UNKNOWN,
    protocol,
    target,
    open,
    longLived: LONG_LIVED_METHODS.get(name),
    rest: undefined,
  };
}
