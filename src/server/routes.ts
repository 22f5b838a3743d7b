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
import { REST_PREFIX } from "../rest/router.js";
import { STORES_PATH } from "../rest/stores.js";
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
}

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
}

/** REST v2's resource routes; version 1 has the same ones under its own prefix (src/rest/version.ts). */
const RESOURCE_ROWS = (version: "v1" | "v2"): Row[] => {
  const at = (path: string) => path.replace("/resources/v2/", `/resources/${version}/`);
  return [
    { target: "rest", prefix: at(DATA_PREFIX), labelAs: at(`${DATA_PREFIX}{store}/{path}`) },
    { target: "rest", path: at(STORES_PATH) },
    { target: "rest", prefix: at(`${STORES_PATH}/`), labelAs: at(`${STORES_PATH}/{store}`) },
    { target: "rest", path: at(POLL_PATH) },
  ];
};

const PROJECTS = `${INSIGHTS_PREFIX}projects`;
const REPORTS = `${INSIGHTS_PREFIX}reports`;

/** The table. Paths under REST_PREFIX and INSIGHTS_PREFIX without a row are REST's "no such endpoint". */
const ROWS: readonly Row[] = [
  ...RESOURCE_ROWS("v2"),
  ...RESOURCE_ROWS("v1"),
  { target: "insights", template: PROJECTS },
  { target: "insights", template: `${PROJECTS}/{project}` },
  { target: "insights", template: `${PROJECTS}/{project}/environments` },
  { target: "insights", template: `${PROJECTS}/{project}/environments/{environment}` },
  { target: "insights", template: `${PROJECTS}/{project}/promotions` },
  { target: "insights", template: REPORTS },
  { target: "insights", template: `${REPORTS}/{report}` },
  ...REPORT_VIEWS.map((view): Row => ({ target: "insights", template: `${REPORTS}/{report}/${view}` })),
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
  const answer = (route: string): RequestRoute => ({
    face,
    route,
    protocol,
    target: row.target,
    open: row.open === true,
  });
  const byMethod = new Map<string, RequestRoute>();
  if (row.label !== false) for (const method of HTTP_METHODS) byMethod.set(method, answer(`${method} ${template}`));
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

const REST_UNKNOWN: RequestRoute = { face: "rest", route: UNKNOWN, protocol: undefined, target: "rest", open: false };
const INSIGHTS_UNKNOWN: RequestRoute = { ...REST_UNKNOWN, target: "insights" };
const OTHER_UNKNOWN: RequestRoute = { face: "other", route: UNKNOWN, protocol: undefined, target: "rpc", open: false };
const OPEN_RPC_UNKNOWN: RequestRoute = { ...OTHER_UNKNOWN, open: true };

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
  if (path.startsWith(REST_PREFIX)) return found?.byMethod.get(method) ?? REST_UNKNOWN;
  if (path.startsWith(INSIGHTS_PREFIX)) return found?.byMethod.get(method) ?? INSIGHTS_UNKNOWN;
  const target = found?.row.target ?? "rpc";
  const open = found?.row.open === true;
  const protocol = rpcProtocol(req);
  if (protocol !== undefined) {
    const face = protocol === "grpc" || protocol === "grpc-web" ? protocol : "connect";
    return { face, route: rpcMethodOf(path), protocol, target, open };
  }
  if (found === undefined) return OTHER_UNKNOWN;
  if (target === "rpc") {
    // A call to a Trove service that no protocol claims is refused or answered as Connect unary;
    // one to an open service is no RPC at all (Connect answers it 404).
    return open ? OPEN_RPC_UNKNOWN : { ...found.unlabelled, route: rpcMethodOf(path) };
  }
  return found.byMethod.get(method) ?? found.unlabelled;
}

function rpcMethodOf(path: string): string {
  const name = path.slice(1);
  return RPC_METHODS.has(name) ? name : UNKNOWN;
}
