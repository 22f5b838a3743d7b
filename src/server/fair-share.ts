// Long-lived work and its budgets (docs/security.md, "Fair share"): long polls, watches, report
// downloads and large uploads hold a connection or a stream for as long as they last, so they
// get a budget of their own below the connection cap (short requests keep the rest), and each
// caller a share of it.

import { Code, ConnectError } from "@connectrpc/connect";
import { type Caller, nobody } from "../auth/caller.js";
import type { RestRequest } from "../rest/http.js";
import { RETRY_AFTER_KEY } from "../services/connect-errors.js";
import { type LimitObserver, RETRY_AFTER_SECONDS } from "./limits.js";

/** RPC methods that last as long as the client likes (waits, watches) or as the data (report documents, uploads). */
const LONG_LIVED_METHODS = new Set([
  "/trove.resources.v2.ChangeService/Poll",
  "/trove.resources.v2.ChangeService/WatchChanges",
  "/trove.resources.v2.ResourceService/Write",
  "/trove.insights.v1.ReportService/WatchReport",
  "/trove.insights.v1.ReportService/GetReportDocument",
  "/grpc.health.v1.Health/Watch",
  "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
  "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
]);

/** A REST body at least this large, or of unknown length, is a large upload. */
export const LARGE_UPLOAD_BYTES = 1024 * 1024;

const REPORT_PATH = /^\/insights\/v1\/reports\/[^/]+(\/document)?$/;

/**
 * Whether a request is long-lived work, decided from its head alone (method, path, query, declared
 * length): a REST poll, a report status wait (`wait=`) or document, an RPC wait, watch, upload
 * stream or report document, or a REST upload of LARGE_UPLOAD_BYTES or of unknown length. A large
 * download is not known from its head: it counts as a short request.
 */
export function longLivedWork(req: RestRequest): boolean {
  const url = req.url ?? "/";
  const query = url.indexOf("?");
  const path = query < 0 ? url : url.slice(0, query);
  if (LONG_LIVED_METHODS.has(path)) return true;
  const method = req.method;
  if (method === "GET") {
    if (path === "/resources/v2/poll" || path === "/resources/v1/poll") return true;
    const report = REPORT_PATH.exec(path);
    return report !== null && (report[1] !== undefined || /[?&]wait=/.test(url.slice(query)));
  }
  if ((method === "PUT" || method === "POST") && path.startsWith("/resources/")) {
    const length = req.headers["content-length"];
    if (length === undefined) return req.headers["transfer-encoding"] !== undefined || req.httpVersionMajor === 2;
    return Number(length) >= LARGE_UPLOAD_BYTES;
  }
  return false;
}

export interface LongLivedBudgetOptions {
  /** Long-lived requests in flight at once, in all. */
  max: number;
  /** Told of the budget that refused a request. */
  refused?: LimitObserver;
}

/** What a response holds of a long-lived budget until it closes (a field of the listener's responses). */
export interface LongLivedHold {
  longLived: "held" | "released" | undefined;
}

/**
 * Counts the long-lived requests in flight and refuses those beyond the budgets. `admit` takes a
 * request at its arrival (once its caller is known), `release` gives its place back when its
 * response closes: what a request holds is one field of its response (no closure, issue 14).
 */
export class LongLivedBudget {
  private inFlight = 0;

  constructor(private readonly options: LongLivedBudgetOptions) {}

  /** Long-lived requests in flight now. */
  get count(): number {
    return this.inFlight;
  }

  /** Admits `req` (marking `res`), or returns the refusal to answer it with. */
  admit(req: RestRequest, res: LongLivedHold, _caller: Caller = nobody): ConnectError | undefined {
    // A response that closed already (its client left while the token was checked) takes no place.
    if (res.longLived === "released" || !longLivedWork(req)) return undefined;
    if (this.inFlight >= this.options.max) {
      this.options.refused?.("long_lived");
      return new ConnectError(
        `too many long-lived requests (polls, watches, uploads): this server takes at most ${this.options.max} at once`,
        Code.Unavailable,
        { [RETRY_AFTER_KEY]: String(RETRY_AFTER_SECONDS) },
      );
    }
    this.inFlight += 1;
    res.longLived = "held";
    return undefined;
  }

  /** Gives back what `res` held, once: its response closed. */
  release(res: LongLivedHold): void {
    if (res.longLived === "held") this.inFlight -= 1;
    res.longLived = "released";
  }
}
