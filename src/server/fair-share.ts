// Long-lived work and its budgets (docs/security.md, "Fair share"): long polls, watches, report
// downloads and large transfers hold a connection or a stream for as long as they last, so they
// get a budget of their own below the connection cap (short requests keep the rest), and each
// caller a share of it.

import { Code, ConnectError } from "@connectrpc/connect";
import { type Caller, nobody } from "../auth/caller.js";
import type { RestRequest } from "../rest/http.js";
import { RETRY_AFTER_KEY } from "../rpc/connect-errors.js";
import { type ClaimingRequest, LARGE_TRANSFER_BYTES, type LongLivedClaim } from "../services/long-lived.js";
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

/** The RPC that reads a resource's contents: long-lived when the resource is large, known once its node is read. */
const READ_METHOD = "/trove.resources.v2.ResourceService/Read";

/** The key of every unauthenticated caller's place (no subject can be empty-prefixed so). */
const UNAUTHENTICATED = "\u0000unauthenticated";

const REPORT_PATH = /^\/insights\/v1\/reports\/[^/]+(\/document)?$/;

/**
 * What a request is, decided from its head alone (method, path, query, declared length):
 * - "long-lived": a REST poll with cursors, a report status wait (`wait=`) or document, an RPC
 *   wait, watch, upload stream or report document, or a REST upload of LARGE_TRANSFER_BYTES or of
 *   unknown length;
 * - "download": a read of contents (a REST GET under /resources/, an RPC Read), long-lived only if
 *   the resource is large, which the core learns when it reads the node (`claimLargeTransfer`);
 * - undefined: a short request.
 */
export function longLivedKind(req: RestRequest): "long-lived" | "download" | undefined {
  const url = req.url ?? "/";
  const query = url.indexOf("?");
  const path = query < 0 ? url : url.slice(0, query);
  if (LONG_LIVED_METHODS.has(path)) return "long-lived";
  if (path === READ_METHOD) return "download";
  const method = req.method;
  if (method === "GET") {
    if (path.startsWith("/resources/")) {
      // A poll with cursors waits; without, it answers the current status at once.
      if (path === "/resources/v2/poll" || path === "/resources/v1/poll")
        return /[?&]store=/.test(url.slice(query)) ? "long-lived" : undefined;
      return "download";
    }
    const report = REPORT_PATH.exec(path);
    return report !== null && (report[1] !== undefined || /[?&]wait=/.test(url.slice(query)))
      ? "long-lived"
      : undefined;
  }
  if ((method === "PUT" || method === "POST") && path.startsWith("/resources/")) {
    const length = req.headers["content-length"];
    if (length === undefined)
      return req.headers["transfer-encoding"] !== undefined || req.httpVersionMajor === 2 ? "long-lived" : undefined;
    return Number(length) >= LARGE_TRANSFER_BYTES ? "long-lived" : undefined;
  }
  return undefined;
}

export interface LongLivedBudgetOptions {
  /** Long-lived requests in flight at once, in all. */
  max: number;
  /** Long-lived requests in flight at once of one authenticated subject. */
  perCaller: number;
  /** Long-lived requests in flight at once of every unauthenticated caller together (open paths: health watches, reflection). */
  unauthenticated: number;
  /** Told of the budget that refused a request. */
  refused?: LimitObserver;
}

/** What a response holds of a long-lived budget until it closes (fields of the listener's responses). */
export interface LongLivedHold {
  longLived: "held" | "released" | undefined;
  /** Whose share the place counts against (the caller's subject). */
  longLivedCaller: string | undefined;
}

/**
 * Counts the long-lived requests in flight and refuses those beyond the budgets. `admit` takes a
 * request at its arrival (once its caller is known), `release` gives its place back when its
 * response closes: what a request holds is one field of its response (no closure, issue 14).
 */
export class LongLivedBudget {
  private inFlight = 0;
  /** Long-lived requests in flight by caller (subject; UNAUTHENTICATED for every unauthenticated caller). */
  private readonly byCaller = new Map<string, number>();

  constructor(private readonly options: LongLivedBudgetOptions) {}

  /** Long-lived requests in flight now. */
  get count(): number {
    return this.inFlight;
  }

  /**
   * Admits `req` (marking `res`), or returns the refusal to answer it with. A download gets a claim
   * on the request instead, for the core to take a place with once it knows the size.
   */
  admit(req: RestRequest, res: LongLivedHold, caller: Caller): ConnectError | undefined {
    const kind = longLivedKind(req);
    if (kind === "long-lived") return this.take(res, caller);
    if (kind === "download") (req as ClaimingRequest).longLivedClaim = new DownloadClaim(this, res, caller);
    return undefined;
  }

  /** Takes a place for `res` in the budgets (once), or returns the refusal. */
  take(res: LongLivedHold, caller: Caller): ConnectError | undefined {
    // A response that closed already (its client left while the token was checked) takes no place.
    if (res.longLived !== undefined) return undefined;
    const unauthenticated = caller === nobody;
    // A token whose subject is "nobody" is not the unauthenticated callers.
    const key = unauthenticated ? UNAUTHENTICATED : caller.subject;
    const share = unauthenticated ? this.options.unauthenticated : this.options.perCaller;
    const held = this.byCaller.get(key) ?? 0;
    // The caller's own share first: a caller over it is told so (429), whether or not the server is full.
    if (held >= share) {
      this.options.refused?.(unauthenticated ? "long_lived_unauthenticated" : "long_lived_per_caller");
      return new ConnectError(
        unauthenticated
          ? `too many long-lived requests without credentials: unauthenticated callers may have at most ${share} at once`
          : `too many long-lived requests (polls, watches, transfers) of ${caller.subject}: one caller may have at most ${share} at once`,
        Code.ResourceExhausted,
        { [RETRY_AFTER_KEY]: String(RETRY_AFTER_SECONDS) },
      );
    }
    if (this.inFlight >= this.options.max) {
      this.options.refused?.("long_lived");
      return new ConnectError(
        `too many long-lived requests (polls, watches, transfers): this server takes at most ${this.options.max} at once`,
        Code.Unavailable,
        { [RETRY_AFTER_KEY]: String(RETRY_AFTER_SECONDS) },
      );
    }
    this.inFlight += 1;
    this.byCaller.set(key, held + 1);
    res.longLived = "held";
    res.longLivedCaller = key;
    return undefined;
  }

  /** Gives back what `res` held, once: its response closed. */
  release(res: LongLivedHold): void {
    if (res.longLived === "held") {
      this.inFlight -= 1;
      const key = res.longLivedCaller as string;
      const held = (this.byCaller.get(key) as number) - 1;
      // A caller with nothing in flight costs no entry.
      if (held === 0) this.byCaller.delete(key);
      else this.byCaller.set(key, held);
    }
    res.longLived = "released";
  }
}

/** A download's claim on the budgets, taken by the core once it knows the contents are large. */
class DownloadClaim implements LongLivedClaim {
  constructor(
    private readonly budget: LongLivedBudget,
    private readonly res: LongLivedHold,
    private readonly caller: Caller,
  ) {}

  claim(): ConnectError | undefined {
    return this.budget.take(this.res, this.caller);
  }
}
