// One TCP listener for every face: the HTTP/2 preface goes to an http2 server
// (gRPC, Connect, gRPC-Web, REST over h2c), anything else to an http server
// (REST and Connect over HTTP/1.1). `createTroveServer` builds; only the entry
// point and tests call `listen`.

import { randomBytes } from "node:crypto";
import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import * as net from "node:net";
import {
  Code,
  type ConnectError,
  type ConnectRouter,
  createContextKey,
  createContextValues,
  type Interceptor,
} from "@connectrpc/connect";
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
import { sendError } from "../rest/errors.js";
import { type RestRequest, type RestResponse, SERVER_HEADER, splitUrl } from "../rest/http.js";
import { INSIGHTS_PREFIX, InsightsRoutes } from "../rest/insights.js";
import { PollRoutes } from "../rest/poll.js";
import { ResourceRoutes } from "../rest/resources.js";
import { handleRest, REST_PREFIX } from "../rest/router.js";
import { StoreRoutes } from "../rest/stores.js";
import { ChangeNotifier } from "../services/change-notifier.js";
import { ChangeCore } from "../services/change-service.js";
import { toConnectError, withConnectErrors } from "../services/connect-errors.js";
import { ProjectCore } from "../services/project-service.js";
import { ReportNotifier } from "../services/report-notifier.js";
import { ReportCore } from "../services/report-service.js";
import { ReportWorker, type ReportWorkerOptions } from "../services/report-worker.js";
import { ResourceCore } from "../services/resource-service.js";
import { StoreCore } from "../services/store-service.js";
import type { StoragePort } from "../storage/port.js";

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
}

/** What authentication leaves on a request: the caller, or why there is none. */
interface Authenticated {
  trove?: { caller: Caller; error?: ConnectError };
}

/** Context value of a Connect call refused by authentication: the error its interceptor throws. */
const refusalKey = createContextKey<ConnectError | undefined>(undefined, { description: "authentication refusal" });

function contextValues(req: unknown) {
  const values = createContextValues();
  const trove = (req as Authenticated).trove;
  values.set(callerKey, trove?.caller ?? nobody);
  if (trove?.error) values.set(refusalKey, trove.error);
  return values;
}

/** Answers a Connect, gRPC or gRPC-Web call refused by authentication in its own protocol. */
const refuse: Interceptor = (next) => (req) => {
  const refusal = req.contextValues.get(refusalKey);
  if (refusal) throw refusal;
  return next(req);
};

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

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
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
  const connect = connectNodeAdapter({ routes, contextValues, interceptors: [refuse] });
  const rest = {
    resources: new ResourceRoutes(resources),
    stores: new StoreRoutes(stores),
    poll: new PollRoutes(changes),
    onServerError: (err: unknown) => logger.error({ err }, "request failed"),
  };
  const insights = new InsightsRoutes(projects, reports);

  const dispatch = (req: RestRequest, res: RestResponse, caller: Caller) => {
    (req as Authenticated).trove = { caller };
    if (req.url?.startsWith(REST_PREFIX)) void handleRest(rest, req, res);
    else if (req.url?.startsWith(INSIGHTS_PREFIX)) void insights.handle(req, res, splitUrl(req.url));
    else connect(req as http.IncomingMessage, res as http.ServerResponse);
  };
  const refused = (req: RestRequest, res: RestResponse, err: unknown) => {
    const error = toConnectError(err);
    if (error.code === Code.Internal) logger.error({ err }, "authentication failed");
    if (!CONNECT_PATHS.some((prefix) => req.url?.startsWith(prefix))) {
      sendError(req, res, error);
    } else {
      (req as Authenticated).trove = { caller: nobody, error };
      connect(req as http.IncomingMessage, res as http.ServerResponse);
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
    if (devIssuer && req.url?.startsWith(DEV_ISSUER_PREFIX)) {
      devIssuer.handle(req, res);
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

  const h1 = http.createServer({ requestTimeout: 0 }, handler);
  // Requests Node's parser refuses never reach the handler: answer them in the spec's shape too.
  h1.on("clientError", (err: NodeJS.ErrnoException, socket: net.Socket) => {
    if (!socket.writable || err.code === "ECONNRESET") {
      socket.destroy();
      return;
    }
    const [status, text] =
      err.code === "HPE_HEADER_OVERFLOW"
        ? ["431 Request Header Fields Too Large", "request headers too large"]
        : ["400 Bad Request", `malformed HTTP request: ${err.code ?? err.message}`];
    const body = `${text}\n`;
    socket.end(
      `HTTP/1.1 ${status}\r\nServer: ${SERVER_HEADER}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  const h2 = http2.createServer({}, handler);
  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  const tcp = net.createServer((socket) => {
    sockets.add(socket);
    // Long-poll answers are small and latency-bound: no Nagle delay.
    socket.setNoDelay(true);
    socket.once("close", () => sockets.delete(socket));
    socket.once("data", (chunk: Buffer) => {
      socket.pause();
      socket.unshift(chunk);
      const n = Math.min(chunk.length, H2_PREFACE.length);
      if (n >= 3 && chunk.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) {
        h2.emit("connection", socket);
      } else {
        h1.emit("connection", socket);
        socket.resume();
      }
    });
  });

  const purge = setInterval(() => {
    options.storage.purgeExpired(now()).catch((err) => logger.error({ err }, "purge of expired tombstones failed"));
  }, options.purgeInterval ?? 60_000);
  purge.unref();

  return {
    logger,
    notifier,
    reportNotifier,
    listen(port, host) {
      return new Promise((resolve, reject) => {
        tcp.once("error", reject);
        tcp.listen(port, host, () => {
          tcp.off("error", reject);
          const address = tcp.address() as AddressInfo;
          devIssuer?.listening(host, address.port);
          resolve(address);
        });
      });
    },
    async close() {
      clearInterval(purge);
      await worker?.close();
      notifier.close();
      const closed = new Promise<void>((resolve) => tcp.close(() => resolve()));
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
      h1.closeAllConnections();
      await closed;
      await options.storage.close();
    },
  };
}
