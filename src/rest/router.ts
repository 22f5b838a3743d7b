// Dispatches REST requests of both API versions to their routes (the same routes: the version
// is a parameter, see version.ts); everything else is not ours.

import { ConnectError } from "@connectrpc/connect";
import { callerKey, type Operation } from "../auth/caller.js";
import { toConnectError } from "../rpc/connect-errors.js";
import { sendError, statusOf } from "./errors.js";
import { type RestRequest, type RestResponse, restContextValues, sendText, splitUrl } from "./http.js";
import type { PollRoutes } from "./poll.js";
import { DATA_PREFIX, parseTarget, type ResourceRoutes } from "./resources.js";
import type { StoreRoutes } from "./stores.js";
import { checkVersion1Store, prefixOf, splitVersion } from "./version.js";

export const REST_PREFIX = "/resources/";

export interface RestRoutes {
  resources: ResourceRoutes;
  stores: StoreRoutes;
  poll: PollRoutes;
  /** Called for every error answered with a 5xx status. */
  onServerError?: (err: unknown) => void;
}

const DATA_OPERATIONS: Record<string, Operation> = { GET: "read", HEAD: "read", PUT: "write", DELETE: "delete" };

export async function handleRest(routes: RestRoutes, req: RestRequest, res: RestResponse): Promise<void> {
  try {
    const url = splitUrl(req.url ?? "/");
    const path = url.pathname;
    // Version 2's resources first: the hot path.
    if (path.startsWith(DATA_PREFIX)) return await routes.resources.handle(req, res, url);
    const versioned = splitVersion(path);
    if (!versioned) return sendText(res, 404, `no such endpoint: ${path}`);
    const { version, rest } = versioned;
    if (rest.startsWith("data/")) {
      const operation = DATA_OPERATIONS[req.method ?? ""];
      if (version === 1 && operation) {
        const { store, path: resource } = parseTarget(path);
        const caller = restContextValues(req).get(callerKey);
        await checkVersion1Store(routes.stores.features, caller, operation, store, resource);
      }
      return await routes.resources.handle(req, res, url, version);
    }
    if (rest === "data") return sendText(res, 400, `a store name is required: ${prefixOf(version)}/data/{store}/`);
    if (rest === "stores" || rest.startsWith("stores/")) return await routes.stores.handle(req, res, url, version);
    if (rest === "poll") return await routes.poll.handle(req, res, url, version, routes.stores.features);
    sendText(res, 404, `no such endpoint: ${path}`);
  } catch (err) {
    const ce = err instanceof ConnectError ? err : toConnectError(err);
    if (statusOf(ce) >= 500) routes.onServerError?.(err);
    sendError(req, res, ce);
  }
}
