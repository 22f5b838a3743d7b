// The faces of the server: REST v2 and v1 (resources, stores, poll), insights REST, the open HTTP
// endpoints that answer without a token (probes, metrics, the API description, the console) and the
// RPC services (src/rpc/connect-routes.ts). Each face only translates to the cores; a request
// reaches `dispatch` with its caller decided and its route looked up by the pipeline (routes.ts).

import { Code } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { Caller } from "../auth/caller.js";
import { sendError } from "../rest/errors.js";
import { type RestRequest, type RestResponse, splitUrl } from "../rest/http.js";
import { InsightsRoutes } from "../rest/insights.js";
import { PollRoutes } from "../rest/poll.js";
import { ResourceRoutes } from "../rest/resources.js";
import { handleRest } from "../rest/router.js";
import { StoreRoutes } from "../rest/stores.js";
import { toConnectError } from "../rpc/connect-errors.js";
import { createConnectFace, type OpenServices } from "../rpc/connect-routes.js";
import { dropUnreadBody, rpcProtocol, sendRpcError } from "../rpc/refusals.js";
import type { Cores } from "./cores.js";
import type { RequestRoute } from "./routes.js";

/** An HTTP endpoint of an open row of the route table, answered for any caller (a probe, /metrics, /openapi.json). */
export type OpenRoute = (req: RestRequest, res: RestResponse) => void;

export type { OpenServices };

export interface FacesOptions {
  cores: Cores;
  logger: Logger;
  maxResourceSize: number;
  /** Handlers of open rows by exact path (a row without one answers 404 like any unknown path). */
  openRoutes?: ReadonlyMap<string, OpenRoute>;
  /** Handlers of open rows by path prefix, e.g. the console's files under /console/. */
  openTrees?: ReadonlyMap<string, OpenRoute>;
  /** Registers the open RPC services (each registration in turn). */
  openServices?: OpenServices | readonly OpenServices[];
}

export interface Faces {
  /** Hands a request to the face its route names, as `caller` (nobody on an open path). */
  dispatch(req: RestRequest, res: RestResponse, caller: Caller, route: RequestRoute): void;
  /** Answers a request refused before its face saw it, in the caller's protocol, without reading its body. */
  refuse(req: RestRequest, res: RestResponse, err: unknown, route: RequestRoute): void;
}

/** What the pipeline leaves on a request: the caller. */
interface Authenticated {
  trove?: { caller: Caller };
}

export function callerOf(req: unknown): Caller | undefined {
  return (req as Authenticated).trove?.caller;
}

export function createFaces(options: FacesOptions): Faces {
  const { cores, logger } = options;
  const connect = createConnectFace({
    cores,
    maxResourceSize: options.maxResourceSize,
    openServices: options.openServices,
    callerOf,
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
    dispatch(req, res, caller, route) {
      (req as Authenticated).trove = { caller };
      switch (route.target) {
        case "rest":
          void handleRest(rest, req, res, route.rest);
          return;
        case "insights":
          void insights.handle(req, res, splitUrl(req.url ?? "/"));
          return;
        case "open": {
          const open = openRoute(splitUrl(req.url ?? "/").pathname);
          if (open) open(req, res);
          else connect(req, res);
          return;
        }
        default:
          connect(req, res);
      }
    },
    refuse(req, res, err, route) {
      const error = toConnectError(err);
      if (error.code === Code.Internal) logger.error({ err }, "authentication failed");
      // A REST path is answered as RPC only when the request says it speaks an RPC protocol.
      const protocol = route.protocol ?? (route.face === "rest" ? rpcProtocol(req) : undefined);
      if (protocol) {
        sendRpcError(req, res, protocol, error);
      } else {
        dropUnreadBody(req, res);
        sendError(req, res, error);
      }
    },
  };
}
