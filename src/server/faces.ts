// The faces of the server and their routes: the RPC services (Connect, gRPC and gRPC-Web through
// one adapter), REST v2 (resources, stores, poll), insights REST, and the open HTTP endpoints that
// answer without a token (probes, metrics, the API description). Each face only translates to the
// cores; a request reaches `dispatch` with its caller already decided by the pipeline.

import type * as http from "node:http";
import { Code, ConnectError, type ConnectRouter, createContextValues, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { BackupService } from "@trove/sdk/gen/trove/admin/v1/backup_pb.js";
import { ProjectService } from "@trove/sdk/gen/trove/insights/v1/projects_pb.js";
import { ReportService } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import type { Logger } from "pino";
import { type Caller, callerKey, nobody } from "../auth/caller.js";
import { sendError } from "../rest/errors.js";
import { type RestRequest, type RestResponse, sendText, splitUrl } from "../rest/http.js";
import { INSIGHTS_PREFIX, InsightsRoutes } from "../rest/insights.js";
import { PollRoutes } from "../rest/poll.js";
import { ResourceRoutes } from "../rest/resources.js";
import { handleRest, REST_PREFIX } from "../rest/router.js";
import { StoreRoutes } from "../rest/stores.js";
import { toConnectError, withConnectErrors, withRequestDecodeErrors } from "../services/connect-errors.js";
import { claimOf, longLivedClaimKey } from "../services/long-lived.js";
import { giveBack } from "../storage/chunk-pool.js";
import type { Cores } from "./cores.js";
import { rpcReadMaxBytes } from "./limits.js";
import { dropUnreadBody, rpcProtocol, sendRpcError, unimplementedReason } from "./rpc-refusals.js";

/** An HTTP endpoint outside the faces' prefixes, answered for any caller (a probe, /metrics, /openapi.json). */
export type OpenRoute = (req: RestRequest, res: RestResponse) => void;

/** Standard RPC services open to every caller (gRPC health, reflection), registered beside Trove's. */
export type OpenServices = (router: ConnectRouter) => void;

/** The RPC services of Trove, in the order they are registered. */
export const TROVE_SERVICES = [
  ResourceService,
  StoreService,
  ChangeService,
  ProjectService,
  ReportService,
  BackupService,
] as const;

/**
 * What answers without a token (DESIGN.md, "Second wave"): these paths, the standard gRPC health and
 * reflection services and, in development mode, the issuer under /auth/ (the pipeline handles it).
 * An open path with no route yet answers 404 / UNIMPLEMENTED like any unknown path.
 */
const OPEN_PATHS = new Set(["/healthz", "/readyz", "/metrics", "/openapi.json", "/", "/console"]);
const OPEN_PREFIXES = [
  "/console/",
  "/grpc.health.v1.Health/",
  "/grpc.reflection.v1.ServerReflection/",
  "/grpc.reflection.v1alpha.ServerReflection/",
];

export function isOpenPath(pathname: string): boolean {
  return OPEN_PATHS.has(pathname) || OPEN_PREFIXES.some((prefix) => pathname.startsWith(prefix));
}

/** Paths of the RPC services: a refused call there is answered in its RPC protocol, anything else as REST. */
const RPC_PATHS = TROVE_SERVICES.map((s) => `/${s.typeName}/`);

export interface FacesOptions {
  cores: Cores;
  logger: Logger;
  maxResourceSize: number;
  /** Open HTTP endpoints by exact path (each must be one of OPEN_PATHS). */
  openRoutes?: ReadonlyMap<string, OpenRoute>;
  /** Open HTTP endpoints by path prefix (each one of OPEN_PREFIXES), e.g. the console's files under /console/. */
  openTrees?: ReadonlyMap<string, OpenRoute>;
  /** Registers the open RPC services (each registration in turn). */
  openServices?: OpenServices | readonly OpenServices[];
}

export interface Faces {
  /** Hands a request to its face, as `caller` (nobody on an open path). */
  dispatch(req: RestRequest, res: RestResponse, caller: Caller): void;
  /** Answers a request refused before its face saw it, in the caller's protocol, without reading its body. */
  refuse(req: RestRequest, res: RestResponse, err: unknown): void;
}

/** What the pipeline leaves on a request: the caller. */
interface Authenticated {
  trove?: { caller: Caller };
}

export function callerOf(req: unknown): Caller | undefined {
  return (req as Authenticated).trove?.caller;
}

function contextValues(req: unknown) {
  const values = createContextValues();
  values.set(callerKey, callerOf(req) ?? nobody);
  values.set(longLivedClaimKey, claimOf(req));
  return values;
}

/**
 * ResourceService as the RPC faces serve it: Read gives each chunk of contents back to the
 * storage's read buffers (src/storage/chunk-pool.ts) once connect has serialized its message.
 * connect serializes a message, copying its chunk, before it asks the handler for the next one
 * (connect 2.1, in the gRPC, gRPC-Web and Connect protocols alike: the handler's iterator feeds
 * `transformSerializeEnvelope` directly), so when Read resumes nothing reads the last chunk any
 * more. Without this each Read message also took a new 1 MiB buffer, garbage soon after: back to
 * back 20 MiB Reads then set off a full mark-compact each (external memory pressure), 83 ms of
 * server CPU per Read against 33 ms (issue 14, docs/benchmarks.md). A call that ends before
 * resuming gives nothing back: the chunk is then freed as any buffer. Chunks the storage did not
 * lend (inline contents, MongoDB's) are left alone.
 */
function rpcResources(core: ServiceImpl<typeof ResourceService>): ServiceImpl<typeof ResourceService> {
  return {
    ...core,
    async *read(request, context) {
      for await (const message of core.read(request, context)) {
        yield message;
        if (message.chunk) giveBack(message.chunk);
      }
    },
  };
}

export function createFaces(options: FacesOptions): Faces {
  const { cores, logger } = options;
  const routes = (router: ConnectRouter) => {
    router.service(ResourceService, rpcResources(withConnectErrors(cores.resources)));
    router.service(StoreService, withConnectErrors(cores.stores));
    router.service(ChangeService, withConnectErrors(cores.changes));
    router.service(ProjectService, withConnectErrors(cores.projects));
    router.service(ReportService, withConnectErrors(cores.reports));
    router.service(BackupService, withConnectErrors(cores.backup));
    for (const register of [options.openServices ?? []].flat()) register(router);
  };
  const connect = connectNodeAdapter({
    // A body that does not decode is the client's mistake: InvalidArgument, not Internal.
    routes: withRequestDecodeErrors(routes),
    contextValues,
    // A larger message is refused (RESOURCE_EXHAUSTED) before it is buffered, a larger declared length at once.
    readMaxBytes: rpcReadMaxBytes(options.maxResourceSize),
    // Answers go uncompressed, as REST's do: gzip of a Read's chunks cost more than the transfer
    // (issue 14, docs/benchmarks.md). Compressed requests are still accepted.
    compressMinBytes: Number.MAX_SAFE_INTEGER,
    // No maxTimeoutMs: a client may wait as long as it likes on Poll, WatchChanges and WatchReport.
    fallback: (nodeReq, nodeRes) => {
      const req = nodeReq as RestRequest;
      const res = nodeRes as RestResponse;
      const protocol = rpcProtocol(req);
      if (protocol) {
        // Connect unary: 404, as for any path that does not exist; the body carries the code.
        sendRpcError(req, res, protocol, new ConnectError(unimplementedReason(req), Code.Unimplemented), {}, 404);
      } else {
        dropUnreadBody(req, res);
        sendText(res, 404, `no such endpoint: ${splitUrl(req.url ?? "/").pathname}`);
      }
    },
  });
  const rest = {
    resources: new ResourceRoutes(cores.resources),
    stores: new StoreRoutes(cores.stores),
    poll: new PollRoutes(cores.changes),
  };
  const insights = new InsightsRoutes(cores.projects, cores.reports);
  const openRoutes = options.openRoutes ?? new Map<string, OpenRoute>();
  const openTrees = [...(options.openTrees ?? [])];
  const openRoute = (pathname: string) =>
    openRoutes.get(pathname) ?? openTrees.find(([prefix]) => pathname.startsWith(prefix))?.[1];

  return {
    dispatch(req, res, caller) {
      (req as Authenticated).trove = { caller };
      const url = req.url ?? "/";
      if (url.startsWith(REST_PREFIX)) void handleRest(rest, req, res);
      else if (url.startsWith(INSIGHTS_PREFIX)) void insights.handle(req, res, splitUrl(url));
      else {
        const open = openRoute(splitUrl(url).pathname);
        if (open) open(req, res);
        else connect(req as http.IncomingMessage, res as http.ServerResponse);
      }
    },
    refuse(req, res, err) {
      const error = toConnectError(err);
      if (error.code === Code.Internal) logger.error({ err }, "authentication failed");
      const protocol =
        rpcProtocol(req) ?? (RPC_PATHS.some((prefix) => req.url?.startsWith(prefix)) ? "connect" : undefined);
      if (protocol) {
        sendRpcError(req, res, protocol, error);
      } else {
        dropUnreadBody(req, res);
        sendError(req, res, error);
      }
    },
  };
}
