// Dispatches REST v2 requests to their routes; everything else is not ours.

import { ConnectError } from "@connectrpc/connect";
import { toConnectError } from "../services/connect-errors.js";
import { sendError, statusOf } from "./errors.js";
import { type RestRequest, type RestResponse, sendText, splitUrl } from "./http.js";
import { POLL_PATH, type PollRoutes } from "./poll.js";
import { DATA_PREFIX, type ResourceRoutes } from "./resources.js";
import { STORES_PATH, type StoreRoutes } from "./stores.js";

export const REST_PREFIX = "/resources/";

export interface RestRoutes {
  resources: ResourceRoutes;
  stores: StoreRoutes;
  poll: PollRoutes;
  /** Called for every error answered with a 5xx status. */
  onServerError?: (err: unknown) => void;
}

export async function handleRest(routes: RestRoutes, req: RestRequest, res: RestResponse): Promise<void> {
  try {
    const url = splitUrl(req.url ?? "/");
    const path = url.pathname;
    if (path.startsWith(DATA_PREFIX)) return await routes.resources.handle(req, res, url);
    if (path === `${DATA_PREFIX.slice(0, -1)}`)
      return sendText(res, 400, "a store name is required: /resources/v2/data/{store}/");
    if (path === STORES_PATH || path.startsWith(`${STORES_PATH}/`)) return await routes.stores.handle(req, res, url);
    if (path === POLL_PATH) return await routes.poll.handle(req, res, url);
    sendText(res, 404, `no such endpoint: ${path}`);
  } catch (err) {
    const ce = err instanceof ConnectError ? err : toConnectError(err);
    if (statusOf(ce) >= 500) routes.onServerError?.(err);
    sendError(req, res, ce);
  }
}
