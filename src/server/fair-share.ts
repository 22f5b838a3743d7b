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
import type { LongLivedKind, RequestRoute } from "./routes.js";

/** The key of every unauthenticated caller's place (no subject can be empty-prefixed so). */
const UNAUTHENTICATED = "\u0000unauthenticated";

/** The query of a request target, from its "?" ("" without one). */
function queryOf(req: RestRequest): string {
  const url = req.url ?? "/";
  const query = url.indexOf("?");
  return query < 0 ? "" : url.slice(query);
}

/**
 * Whether a request of a route that may be long-lived (RequestRoute.longLived, decided by the route
 * table) is, from its head alone: a poll with cursors, a report status wait, a REST upload of
 * LARGE_TRANSFER_BYTES or of unknown length; "always" routes are. A download is decided later, by
 * the core, once it knows the size (claimLargeTransfer).
 */
export function isLongLived(kind: Exclude<LongLivedKind, "download">, req: RestRequest): boolean {
  switch (kind) {
    case "always":
      return true;
    // A poll with cursors waits; without, it answers the current status at once.
    case "poll":
      return /[?&]store=/.test(queryOf(req));
    case "report-wait":
      return /[?&]wait=/.test(queryOf(req));
    case "upload": {
      const length = req.headers["content-length"];
      if (length === undefined) return req.headers["transfer-encoding"] !== undefined || req.httpVersionMajor === 2;
      return Number(length) >= LARGE_TRANSFER_BYTES;
    }
  }
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
  /** The request's route: what it may be of long-lived work (routes.ts). */
  route: RequestRoute | undefined;
  /**
   * A download's claim, for the core to take a place with once it knows the size: the budget and
   * the caller, kept in fields of the response (`claimPlace`), so a small read allocates nothing.
   */
  claimBudget: LongLivedBudget | undefined;
  claimCaller: Caller | undefined;
}

/** The claim of a download that `admit` marked (the response's `claim()`): a place, or the refusal. */
export function claimPlace(res: LongLivedHold): ConnectError | undefined {
  return res.claimBudget?.take(res, res.claimCaller ?? nobody);
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
  admit(req: RestRequest, res: LongLivedHold & LongLivedClaim, caller: Caller): ConnectError | undefined {
    const kind = res.route?.longLived;
    if (kind === undefined) return undefined;
    if (kind === "download") {
      res.claimBudget = this;
      res.claimCaller = caller;
      (req as ClaimingRequest).longLivedClaim = res;
      return undefined;
    }
    return isLongLived(kind, req) ? this.take(res, caller) : undefined;
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
