// One TCP listener for every face: the HTTP/2 preface goes to an http2 server
// (gRPC, Connect, gRPC-Web, REST over h2c), anything else to an http server
// (REST and Connect over HTTP/1.1). `createTroveServer` builds; only the entry
// point and tests call `listen`.

import { randomBytes } from "node:crypto";
import type * as http from "node:http";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, type ConnectRouter, createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { type Logger, pino } from "pino";
import { anonymousCaller, type Caller, callerKey, nobody } from "../auth/caller.js";
import { DEV_ISSUER_PREFIX, type DevIssuer } from "../auth/dev-issuer.js";
import type { Authenticator } from "../auth/verifier.js";
import { ProjectService } from "../gen/trove/insights/v1/projects_pb.js";
import { ReportService } from "../gen/trove/insights/v1/reports_pb.js";
import { ChangeService } from "../gen/trove/resources/v2/changes_pb.js";
import { ResourceService } from "../gen/trove/resources/v2/resources_pb.js";
import { StoreService } from "../gen/trove/resources/v2/stores_pb.js";
import { sendError, serverErrorOf } from "../rest/errors.js";
import { type RestRequest, type RestResponse, sendText, splitUrl } from "../rest/http.js";
import { INSIGHTS_PREFIX, InsightsRoutes } from "../rest/insights.js";
import { PollRoutes } from "../rest/poll.js";
import { ResourceRoutes } from "../rest/resources.js";
import { handleRest, REST_PREFIX } from "../rest/router.js";
import { StoreRoutes } from "../rest/stores.js";
import { ChangeNotifier } from "../services/change-notifier.js";
import { ChangeCore } from "../services/change-service.js";
import { toConnectError, withConnectErrors, withRequestDecodeErrors } from "../services/connect-errors.js";
import { ProjectCore } from "../services/project-service.js";
import { ReportNotifier } from "../services/report-notifier.js";
import { ReportCore } from "../services/report-service.js";
import { ReportWorker, type ReportWorkerOptions } from "../services/report-worker.js";
import { ResourceCore } from "../services/resource-service.js";
import { StoreCore } from "../services/store-service.js";
import type { StoragePort } from "../storage/port.js";
import { DEFAULT_LIMITS, rpcReadMaxBytes, type ServerLimits } from "./limits.js";
import { ALLOWED_METHODS, createListener, INVALID_TARGET } from "./listener.js";
import { dropUnreadBody, rpcProtocol, sendRpcError, unimplementedReason } from "./rpc-refusals.js";

export interface TroveServerOptions {
  storage: StoragePort;
  logger?: Logger;
  /** Largest resource accepted, in bytes (default 4 GiB). */
  maxResourceSize?: number;
  /** Longest a poll waits for an event, in milliseconds (default 30 s, the spec's). */
  pollWait?: number;
  /** How often expired tombstones are purged, in milliseconds (default 60 s). */
  purgeInterval?: number;
  now?: () => number;
  /**
   * How callers are authenticated: a token verifier (every request then needs
   * `Authorization: Bearer <token>`), or "anonymous", where every caller has full access
   * without credentials. Only tests and the auth-off benchmark choose "anonymous"; the CLI never does.
   */
  auth: Authenticator | "anonymous";
  /** The development issuer, served under /auth/ (`trove serve` without a configured issuer). */
  devIssuer?: DevIssuer;
  /** How long a finished report stays available, in milliseconds (default 90 days). */
  reportAvailability?: number;
  /**
   * The report worker of this instance: settings, or false for an instance that generates no
   * reports (another instance on the same MongoDB does). Default: a worker with default settings.
   */
  reportWorker?:
    | Partial<Omit<ReportWorkerOptions, "storage" | "notifier" | "availabilityMs" | "now" | "logger">>
    | false;
  /** Connection limits and timeouts (limits.ts has the defaults). */
  limits?: Partial<ServerLimits>;
}

/** What authentication leaves on a request: the caller. */
interface Authenticated {
  trove?: { caller: Caller };
}

function contextValues(req: unknown) {
  const values = createContextValues();
  values.set(callerKey, (req as Authenticated).trove?.caller ?? nobody);
  return values;
}

/**
 * What answers without a token (DESIGN.md, "Second wave"): probes, metrics, the API description,
 * the standard gRPC health and reflection services and, in development mode, the issuer under
 * /auth/ (handled before this). Those not built yet answer 404 / UNIMPLEMENTED like any unknown path.
 */
const OPEN_PATHS = new Set(["/healthz", "/readyz", "/metrics", "/openapi.json"]);
const OPEN_PREFIXES = [
  "/grpc.health.v1.Health/",
  "/grpc.reflection.v1.ServerReflection/",
  "/grpc.reflection.v1alpha.ServerReflection/",
];

export function isOpenPath(pathname: string): boolean {
  return OPEN_PATHS.has(pathname) || OPEN_PREFIXES.some((prefix) => pathname.startsWith(prefix));
}

/** A request target Node's HTTP/1.1 parser would take: printable ASCII. HTTP/2 lets any byte through. */
const PRINTABLE_TARGET = /^[\x21-\x7e]*$/;

export interface TroveServer {
  listen(port: number, host: string): Promise<AddressInfo>;
  /** Stops accepting, closes every connection, then the storage. */
  close(): Promise<void>;
  readonly logger: Logger;
  /** Armed long-poll and watch waiters (leak checks, metrics). */
  readonly notifier: ChangeNotifier;
  /** Report status watchers (leak checks). */
  readonly reportNotifier: ReportNotifier;
}

/** Paths of the RPC services: a refused call there is answered in its RPC protocol, anything else as REST. */
const CONNECT_PATHS = [ResourceService, StoreService, ChangeService, ProjectService, ReportService].map(
  (s) => `/${s.typeName}/`,
);

export const DEFAULT_MAX_RESOURCE_SIZE = 4 * 1024 ** 3;

export function createTroveServer(options: TroveServerOptions): TroveServer {
  const logger = options.logger ?? pino({ level: "info" });
  const now = options.now ?? Date.now;
  const resources = new ResourceCore({
    storage: options.storage,
    maxResourceSize: options.maxResourceSize ?? DEFAULT_MAX_RESOURCE_SIZE,
    now,
  });
  const stores = new StoreCore({ storage: options.storage, now });
  const notifier = new ChangeNotifier(options.storage);
  const changes = new ChangeCore({ storage: options.storage, notifier, pollWait: options.pollWait });
  const projects = new ProjectCore({ storage: options.storage, resources, now });
  const reportNotifier = new ReportNotifier();
  const availabilityMs = options.reportAvailability;
  const reports = new ReportCore({
    storage: options.storage,
    projects,
    notifier: reportNotifier,
    availabilityMs,
    now,
  });
  const worker =
    options.reportWorker === false
      ? undefined
      : new ReportWorker({
          ...options.reportWorker,
          storage: options.storage,
          notifier: reportNotifier,
          availabilityMs: reports.availabilityMs,
          now,
          logger,
        });
  worker?.start();
  const routes = (router: ConnectRouter) => {
    router.service(ResourceService, withConnectErrors(resources));
    router.service(StoreService, withConnectErrors(stores));
    router.service(ChangeService, withConnectErrors(changes));
    router.service(ProjectService, withConnectErrors(projects));
    router.service(ReportService, withConnectErrors(reports));
  };
  const maxResourceSize = options.maxResourceSize ?? DEFAULT_MAX_RESOURCE_SIZE;
  const connect = connectNodeAdapter({
    // A body that does not decode is the client's mistake: InvalidArgument, not Internal.
    routes: withRequestDecodeErrors(routes),
    contextValues,
    // A larger message is refused (RESOURCE_EXHAUSTED) before it is buffered, a larger declared length at once.
    readMaxBytes: rpcReadMaxBytes(maxResourceSize),
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
    resources: new ResourceRoutes(resources),
    stores: new StoreRoutes(stores),
    poll: new PollRoutes(changes),
  };
  const insights = new InsightsRoutes(projects, reports);

  const dispatch = (req: RestRequest, res: RestResponse, caller: Caller) => {
    (req as Authenticated).trove = { caller };
    if (req.url?.startsWith(REST_PREFIX)) void handleRest(rest, req, res);
    else if (req.url?.startsWith(INSIGHTS_PREFIX)) void insights.handle(req, res, splitUrl(req.url));
    else connect(req as http.IncomingMessage, res as http.ServerResponse);
  };
  // A refusal is answered before the body is read, in the caller's protocol, and the body is never taken.
  const refused = (req: RestRequest, res: RestResponse, err: unknown) => {
    const error = toConnectError(err);
    if (error.code === Code.Internal) logger.error({ err }, "authentication failed");
    const protocol =
      rpcProtocol(req) ?? (CONNECT_PATHS.some((prefix) => req.url?.startsWith(prefix)) ? "connect" : undefined);
    if (protocol) {
      sendRpcError(req, res, protocol, error);
    } else {
      dropUnreadBody(req, res);
      sendError(req, res, error);
    }
  };
  const auth = options.auth;
  const devIssuer = options.devIssuer;

  const idPrefix = randomBytes(4).toString("hex");
  let counter = 0;
  const handler = (req: RestRequest, res: RestResponse) => {
    const started = performance.now();
    const id =
      (req.headers["x-request-id"] as string | undefined)?.slice(0, 128) ?? `${idPrefix}-${(++counter).toString(36)}`;
    (res as http.ServerResponse).setHeader("X-Request-Id", id);
    (res as http.ServerResponse).once("finish", () => {
      // Every 5xx answer (REST, insights, Connect) is one error line with the request id.
      if (res.statusCode >= 500) {
        logger.error(
          { req: id, method: req.method, status: res.statusCode, err: serverErrorOf(res) },
          "request failed",
        );
      }
      if (logger.isLevelEnabled("info")) {
        // Never the headers (Authorization) nor, for the issuer, the query string.
        const url = req.url?.startsWith(DEV_ISSUER_PREFIX) ? req.url.replace(/\?.*$/, "") : req.url;
        logger.info(
          {
            req: id,
            method: req.method,
            url,
            status: res.statusCode,
            caller: (req as Authenticated).trove?.caller.subject,
            ms: Math.round((performance.now() - started) * 10) / 10,
          },
          "request",
        );
      }
    });
    // The same request gets the same answer on HTTP/1.1 and HTTP/2, whatever Node's parsers let through.
    if (req.method === "CONNECT") {
      dropUnreadBody(req, res);
      sendText(res, 405, "CONNECT is not supported", { Allow: ALLOWED_METHODS });
      return;
    }
    if (!PRINTABLE_TARGET.test(req.url ?? "")) {
      dropUnreadBody(req, res);
      sendText(res, 400, INVALID_TARGET);
      return;
    }
    if (devIssuer && req.url?.startsWith(DEV_ISSUER_PREFIX)) {
      devIssuer.handle(req, res);
      return;
    }
    // Before authentication, since a browser's preflight carries no credentials (CORS comes here).
    if (req.method === "OPTIONS") {
      dropUnreadBody(req, res);
      sendText(res, 405, `OPTIONS is not supported on ${splitUrl(req.url ?? "/").pathname}`, {
        Allow: ALLOWED_METHODS,
      });
      return;
    }
    if (isOpenPath(splitUrl(req.url ?? "/").pathname)) {
      dispatch(req, res, nobody);
      return;
    }
    if (auth === "anonymous") {
      dispatch(req, res, anonymousCaller);
      return;
    }
    let caller: Caller | Promise<Caller>;
    try {
      caller = auth.authenticate(req.headers.authorization);
    } catch (err) {
      refused(req, res, err);
      return;
    }
    if (caller instanceof Promise) {
      caller.then(
        (c) => dispatch(req, res, c),
        (err) => refused(req, res, err),
      );
    } else {
      dispatch(req, res, caller);
    }
  };

  const listener = createListener({ handler, limits: { ...DEFAULT_LIMITS, ...options.limits } });

  const purge = setInterval(() => {
    options.storage.purgeExpired(now()).catch((err) => logger.error({ err }, "purge of expired tombstones failed"));
  }, options.purgeInterval ?? 60_000);
  purge.unref();

  return {
    logger,
    notifier,
    reportNotifier,
    listen(port, host) {
      return listener.listen(port, host).then((address) => {
        devIssuer?.listening(host, address.port);
        return address;
      });
    },
    async close() {
      clearInterval(purge);
      await worker?.close();
      notifier.close();
      await listener.close();
      await options.storage.close();
    },
  };
}
