// Dispatches REST requests of both API versions to their routes (the same routes: the version
// is a parameter, see version.ts), as the route table's row of the request says (server/routes.ts).

import { ConnectError } from "@connectrpc/connect";
import { callerKey, type Operation } from "../auth/caller.js";
import { toConnectError } from "../rpc/connect-errors.js";
import { sendError, statusOf } from "./errors.js";
import { type RestRequest, type RestResponse, restContextValues, sendText, splitUrl } from "./http.js";
import type { PollRoutes } from "./poll.js";
import { parseTarget, type ResourceRoutes } from "./resources.js";
import type { StoreRoutes } from "./stores.js";
import { type ApiVersion, checkVersion1Store, prefixOf, splitVersion } from "./version.js";

export const REST_PREFIX = "/resources/";

export interface RestRoutes {
  resources: ResourceRoutes;
  stores: StoreRoutes;
  poll: PollRoutes;
  /** Called for every error answered with a 5xx status. */
  onServerError?: (err: unknown) => void;
}

const DATA_OPERATIONS: Record<string, Operation> = { GET: "read", HEAD: "read", PUT: "write", DELETE: "delete" };

/** Which REST routes answer a path, and in which version: the route table's row says (server/routes.ts). */
export interface RestRoute {
  readonly routes: "resources" | "stores" | "poll";
  readonly version: ApiVersion;
}

/**
 * Answers a REST request with the routes its row of the route table names (`route`, looked up once by
 * the pipeline); undefined for a path under /resources/ that no row has.
 */
export async function handleRest(
  routes: RestRoutes,
  req: RestRequest,
  res: RestResponse,
  route: RestRoute | undefined,
): Promise<void> {
  try {
    const url = splitUrl(req.url ?? "/");
    switch (route?.routes) {
      case "resources": {
        const { version } = route;
        const operation = DATA_OPERATIONS[req.method ?? ""];
        if (version === 1 && operation) {
          const { store, path: resource } = parseTarget(url.pathname);
          const caller = restContextValues(req).get(callerKey);
          await checkVersion1Store(routes.stores.features, caller, operation, store, resource);
        }
        return await routes.resources.handle(req, res, url, version);
      }
      case "stores":
        return await routes.stores.handle(req, res, url, route.version);
      case "poll":
        return await routes.poll.handle(req, res, url, route.version, routes.stores.features);
      default: {
        const versioned = splitVersion(url.pathname);
        if (versioned?.rest === "data") {
          return sendText(res, 400, `a store name is required: ${prefixOf(versioned.version)}/data/{store}/`);
        }
        sendText(res, 404, `no such endpoint: ${url.pathname}`);
      }
    }
  } catch (err) {
    const ce = err instanceof ConnectError ? err : toConnectError(err);
    if (statusOf(ce) >= 500) routes.onServerError?.(err);
    sendError(req, res, ce);
  }
}
