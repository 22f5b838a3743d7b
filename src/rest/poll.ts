// REST poll: GET /resources/v{1,2}/poll, the long poll of the change feed, in
// the spec's plain-text lines (docs/change-feed.md). Version 1 neither follows nor reports
// stores without sync-recursive (version.ts).

import { type Event, Operation } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { type Caller, callerKey } from "../auth/caller.js";
import { BadRequestError } from "../domain/errors.js";
import type { ChangeCore, PollAnswer } from "../services/change-service.js";
import { sendError } from "./errors.js";
import { ClientGone, type RequestUrl, type RestRequest, type RestResponse, restContextValues, send } from "./http.js";
import { type ApiVersion, checkVersion1Store, type StoreFeatures, servesStore } from "./version.js";

export const POLL_PATH = "/resources/v2/poll";

interface PollQuery {
  cursors: Array<{ store: string; eventId: bigint }>;
  waitMillis: number;
}

/** `store={name}:{event id}` once per followed store, and optionally `wait={seconds}`. */
export function parsePollQuery(search: string): PollQuery {
  const q: PollQuery = { cursors: [], waitMillis: 0 };
  let waitSeen = false;
  for (const [name, value] of new URLSearchParams(search)) {
    if (name === "store") {
      const m = /^([^:]+):(\d{1,16})$/.exec(value);
      if (!m) throw new BadRequestError(`store must be {store name}:{event id}, not ${JSON.stringify(value)}`);
      q.cursors.push({ store: m[1] as string, eventId: BigInt(m[2] as string) });
    } else if (name === "wait") {
      if (waitSeen) throw new BadRequestError("query parameter wait given twice");
      waitSeen = true;
      if (!/^\d{1,5}(\.\d{1,3})?$/.test(value))
        throw new BadRequestError(`wait must be a number of seconds, not ${JSON.stringify(value)}`);
      q.waitMillis = Math.max(1, Math.round(Number(value) * 1000));
    } else {
      throw new BadRequestError(`unknown query parameter ${name}: use store={name}:{event id} and wait={seconds}`);
    }
  }
  return q;
}

/** One line of the poll body: `CHANGE|id|uri|operation|previous tag|tag|type`, or `RESET store id`. */
export function eventLine(e: Event): string {
  if (e.kind.case === "reset") return `RESET ${e.kind.value.store} ${e.kind.value.eventId}`;
  if (e.kind.case !== "change") throw new Error("unknown event kind");
  const c = e.kind.value;
  const op = c.operation === Operation.DELETE ? "delete" : "modify";
  return `CHANGE|${c.eventId}|${c.uri}|${op}|${c.previousTag}|${c.tag}|${c.type}`;
}

export class PollRoutes {
  constructor(private readonly core: ChangeCore) {}

  /**
   * `features` is asked on version 1 only: of each store followed, and of each store a status poll
   * reports. Returns once the poll is parked (a promise only while version 1 checks its stores), so
   * that no frame of the router's or of this route's is held while the poll waits (issue 14).
   */
  handle(
    req: RestRequest,
    res: RestResponse,
    url: RequestUrl,
    version: ApiVersion = 2,
    features?: StoreFeatures,
  ): Promise<void> | undefined {
    if (req.method !== "GET") {
      send(
        res,
        405,
        { Allow: "GET", "Content-Type": "text/plain; charset=utf-8" },
        `method ${req.method} not allowed\n`,
      );
      return;
    }
    const query = parsePollQuery(url.search);
    const caller = restContextValues(req).get(callerKey);
    if (version !== 1 || !features) {
      this.park(req, res, query, caller, undefined);
      return;
    }
    if (query.cursors.length === 0) {
      this.park(req, res, query, caller, features);
      return;
    }
    return this.checkVersion1(features, caller, query).then(() => this.park(req, res, query, caller, undefined));
  }

  private async checkVersion1(features: StoreFeatures, caller: Caller, query: PollQuery): Promise<void> {
    for (const { store } of query.cursors) await checkVersion1Store(features, caller, "read", store, "");
  }

  /** Starts the poll; throws at once for cursors the core refuses (the router answers the error). */
  private park(req: RestRequest, res: RestResponse, query: PollQuery, caller: Caller, features?: StoreFeatures): void {
    // No HandlerContext (three Headers, two more abort controllers), nor an AbortController: a
    // parked poll holds its ParkedPoll, the core's PendingPoll and a waiter (issue 14).
    const poll = new ParkedPoll(req, res, features);
    this.core.startPoll(query.cursors, query.waitMillis, caller, poll, poll);
  }
}

/**
 * A REST poll while it waits, and then its answer: it learns that the client went away (ClientGone)
 * and writes what the core answers. `features` (a version 1 status poll) leaves out the stores
 * version 1 does not serve.
 */
class ParkedPoll extends ClientGone implements PollAnswer {
  constructor(
    private readonly req: RestRequest,
    res: RestResponse,
    private readonly features: StoreFeatures | undefined,
  ) {
    super(res);
  }

  answer(found: Event[]): void {
    // The client went away during the wait: there is no one to answer.
    if (this.aborted) return;
    if (this.features === undefined) {
      writePollAnswer(this.res, found);
      return;
    }
    servedByVersion1(this.features, found).then(
      (events) => writePollAnswer(this.res, events),
      (err: unknown) => this.fail(err),
    );
  }

  fail(err: unknown): void {
    sendError(this.req, this.res, err);
  }
}

/** A status poll (no cursors) reports every store the caller may read: on version 1, only those it serves. */
async function servedByVersion1(features: StoreFeatures, events: Event[]): Promise<Event[]> {
  const served = await Promise.all(
    events.map(async (e) => {
      const found = e.kind.case === undefined ? undefined : await features(e.kind.value.store);
      // A store deleted since the core answered: its event stays, as version 2 gives it.
      return found === undefined || servesStore(1, found);
    }),
  );
  return events.filter((_, i) => served[i]);
}

function writePollAnswer(res: RestResponse, events: Event[]): void {
  if (events.length === 0) {
    send(res, 204, { "Cache-Control": "no-store" });
    return;
  }
  const body = `${events.map(eventLine).join("\n")}\n`;
  send(res, 200, { "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store" }, body);
}
