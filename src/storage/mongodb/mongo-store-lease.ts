// The write lease of a store on MongoDB: one writer per store across every instance, made
// exclusive by inserting a ticket document with a unique _id (atomic on every MongoDB-compatible
// server) rather than by a conditional update (not atomic on FerretDB v1; docs/mongodb.md).

import { randomUUID } from "node:crypto";
import type { Collection, Db, Filter } from "mongodb";
import { NotFoundError, UnavailableError } from "../../domain/errors.js";
import type { StorageLogger } from "../port.js";
import { isDuplicateKey } from "./mongo-driver.js";

/** The fields of a store document that the lease reads and writes. */
export interface LeaseFields {
  _id: string;
  /** Last event id allocated. */
  lastEventId: number;
  /** Every event up to this id is written (or will never be): the feed's watermark. */
  committedEventId: number;
  /** The epoch of the last holder that announced itself; absent before the first. */
  leaseEpoch?: number;
  /** When that holder's lease ends unless it renews it (ms since 1970, its clock). */
  leaseUntil?: number;
  /** That holder is done. */
  leaseReleased?: boolean;
}

/**
 * One ticket per epoch of a store's lease, `_id` = "{store}#{epoch}". Whoever inserts it owns the
 * epoch; it may write once every earlier epoch is released or expired.
 */
interface TicketDoc {
  _id: string;
  store: string;
  epoch: number;
  owner: string;
  /** Until when a ticket that has not been announced keeps its place in the queue. */
  until: number;
  /** Given up before being announced: later tickets go past it. */
  released?: boolean;
}

interface Ticket {
  store: string;
  epoch: number;
  /** performance.now() after which this process must not announce the ticket any more. */
  validUntil: number;
}

export interface StoreLeaseOptions {
  /** How long an announced holder keeps the lease without renewing it, in ms. */
  lease: number;
  /** How long a writer waits for the lease before giving up, in ms. */
  lockTimeout: number;
}

/** The lease's fields of a store document, as the wait for a turn reads them. */
type LeaseState = Pick<LeaseFields, "_id" | "leaseEpoch" | "leaseUntil" | "leaseReleased">;
const LEASE_STATE = { leaseEpoch: 1, leaseUntil: 1, leaseReleased: 1 } as const;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function ticketId(store: string, epoch: number): string {
  return `${store}#${epoch}`;
}

/**
 * The lease of one store held by this process: the fence of every write made under it.
 * Store-document writes made under the lease are filtered on `fence` (the epoch must still be
 * the announced one); other writes call `keep()` first, which renews the lease every third of
 * its length and refuses once it may have run out.
 *
 * Event ids: the announcement may reserve some (`$inc` of `lastEventId` with it, no trip of its
 * own); `allocate` hands them out, and reserves more when they are not enough. What was handed
 * out is `used`; the release publishes it and gives the rest back (`lastEventId` = `used`), so a
 * write refused under the lease leaves the store's ids as they were.
 */
export class StoreLease {
  /** The next id to hand out. */
  private next: number;
  /** The last id reserved in the store document (its `lastEventId` as this holder left it). */
  private reserved: number;

  constructor(
    private readonly stores: Collection<LeaseFields>,
    private readonly options: StoreLeaseOptions,
    readonly store: string,
    readonly epoch: number,
    /** performance.now() when the last renewal (or the announcement) was sent. */
    private renewedAt: number,
    /** The store's `lastEventId` before this holder's reservation, and after it. */
    ids: { before: number; reserved: number },
  ) {
    this.next = ids.before + 1;
    this.reserved = ids.reserved;
  }

  /** The last id handed out under this lease (or the last one before it): published on release. */
  get used(): number {
    return this.next - 1;
  }

  /** Whether ids were reserved and not handed out: the release gives them back. */
  get unused(): boolean {
    return this.reserved > this.used;
  }

  /** Matches the store document only while this lease is the announced one. */
  get fence(): { _id: string; leaseEpoch: number } {
    return { _id: this.store, leaseEpoch: this.epoch };
  }

  /**
   * Hands out `count` consecutive event ids and returns the first: from the announcement's
   * reservation when it has enough left (no trip), else reserving the shortfall (persisted
   * before use; renews the lease).
   */
  async allocate(count: number): Promise<number> {
    if (this.next + count - 1 <= this.reserved) {
      const first = this.next;
      this.next += count;
      return first;
    }
    const sent = performance.now();
    const after = await this.stores.findOneAndUpdate(
      this.fence,
      {
        $inc: { lastEventId: this.next + count - 1 - this.reserved },
        $set: { leaseUntil: Date.now() + this.options.lease },
      },
      { returnDocument: "after" },
    );
    if (!after) throw this.lost();
    this.renewedAt = sent;
    this.reserved = after.lastEventId;
    this.next = after.lastEventId + 1;
    return after.lastEventId - count + 1;
  }

  /**
   * Call before each write of a long operation: renews the lease when a third of it has passed
   * since the last renewal. A renewal is fenced on the epoch, and another instance announces
   * itself only over a lease it saw released or run out and that is still so when it announces:
   * so a renewal that lands, however late (a loaded machine), means nobody took over, and the
   * holder goes on; one that does not land means somebody did, and the holder stops (lost()).
   */
  async keep(): Promise<void> {
    if (performance.now() - this.renewedAt < this.options.lease / 3) return;
    const sent = performance.now();
    const res = await this.stores.updateOne(this.fence, { $set: { leaseUntil: Date.now() + this.options.lease } });
    if (res.matchedCount === 0) throw this.lost();
    this.renewedAt = sent;
  }

  lost(): UnavailableError {
    return new UnavailableError(`lost the write lease of store ${this.store}; retry`);
  }
}

/**
 * Takes and releases stores' leases for one process. Taking a lease:
 *
 * 1. Take a ticket: insert the first free epoch after the announced one ("{store}#{n}"). Only one
 *    inserter gets an epoch, on every server (a unique _id is enforced atomically).
 * 2. Wait until every earlier epoch is done: the announced one released or past its `leaseUntil`,
 *    any ticket in between given up or past its `until`. Tickets are served in epoch order.
 * 3. Announce: set the store document's `leaseEpoch` to the ticket's epoch, only if it is still
 *    lower. From then on the holder's store-document writes are filtered on that epoch.
 *
 * After releasing epoch n, this process takes n+1 directly (one insert, no read): nobody else
 * can have announced since, and if someone took n+1, the insert fails and it queues.
 */
export class StoreLeases {
  /** The store documents (collection `stores`), as far as the lease goes. */
  private readonly stores: Collection<LeaseFields>;
  private readonly tickets: Collection<TicketDoc>;
  /** The epoch this process last released, per store. */
  private readonly lastReleased = new Map<string, number>();
  /**
   * Stores whose next ticket, after this process's own release, another instance took last time:
   * the store's lease fields are read together with that insert, for the queue if it fails again.
   */
  private readonly contended = new Set<string>();
  private readonly owner = randomUUID();

  constructor(
    db: Db,
    private readonly options: StoreLeaseOptions,
  ) {
    this.stores = db.collection<LeaseFields>("stores");
    this.tickets = db.collection<TicketDoc>("storeLeases");
  }

  async ensureIndexes(): Promise<void> {
    await this.tickets.createIndex({ store: 1, epoch: 1 }, { name: "store_epoch" });
  }

  /**
   * Takes the store's lease; returns the store document as announced (its `lastEventId` without
   * this holder's reservation), with any dead holder's ids published. `reserve` event ids are
   * reserved by the announcement itself (StoreLease.allocate hands them out; the release gives
   * back what was not). `early`, when given, is sent together with the announcement if this
   * process holds the ticket right after its own release (see take): its result comes back as
   * `early`, or undefined when it was not sent or the announcement was not made over that release.
   */
  async acquire<T = never>(
    store: string,
    options: { early?: () => Promise<T>; reserve?: number } = {},
  ): Promise<{ doc: LeaseFields; lease: StoreLease; early: T | undefined }> {
    const held: { ticket?: Ticket; released?: boolean } = {};
    try {
      return await this.take(store, held, options.early, options.reserve ?? 0);
    } catch (err) {
      // A ticket left in the queue would hold up every later writer until its `until`: give it
      // up, later if the database is away now. (Announced or not: the store document's lease
      // fields decide for an announced one.)
      const ticket = held.ticket;
      if (ticket && !held.released) {
        this.retry(() => this.giveUp(ticket));
        // An announcement whose answer was lost may have landed: release it (fenced on the epoch).
        this.retry(() =>
          this.stores.updateOne({ _id: store, leaseEpoch: ticket.epoch }, { $set: { leaseReleased: true } }),
        );
      }
      throw err;
    }
  }

  private async take<T>(
    store: string,
    held: { ticket?: Ticket; released?: boolean },
    early: (() => Promise<T>) | undefined,
    reserve: number,
  ): Promise<{ doc: LeaseFields; lease: StoreLease; early: T | undefined }> {
    const deadline = performance.now() + this.options.lockTimeout;
    const released = this.lastReleased.get(store);
    this.lastReleased.delete(store);
    let ticket: Ticket | undefined;
    /** The store document as it was seen free for `ticket`: the announcement's filter. */
    let over: Filter<LeaseFields> | undefined;
    /** The lease's fields as read just before `ticket` was taken: the first look of the wait. */
    let seen: LeaseState | undefined;
    /** The store's lease fields read together with a ticket's insert that failed. */
    let known: LeaseState | undefined;
    if (released !== undefined) {
      // After our own release of epoch n, n+1 is ours to take at once if nobody queued for it.
      // Where another instance took it last time, the lease's fields come in the same round trip
      // (a read: one command more, and no trip more, when the insert succeeds after all).
      const reading = this.contended.has(store) ? this.readLease(store).catch(() => undefined) : undefined;
      ticket = await this.insertTicket(store, released + 1);
      held.ticket = ticket;
      if (ticket) {
        over = { _id: store, leaseEpoch: released, leaseReleased: true };
        this.contended.delete(store);
      } else {
        known = (await reading) ?? undefined;
        this.contended.add(store);
      }
    }
    for (;;) {
      if (!ticket) {
        if (performance.now() > deadline) throw this.busy(store);
        ({ ticket, seen } = await this.takeTicket(store, known));
        known = undefined;
        held.ticket = ticket;
        over = undefined;
      }
      over ??= await this.waitForTurn(ticket, deadline, seen);
      seen = undefined;
      if (!over) {
        ticket = undefined;
        held.ticket = undefined;
        continue;
      }
      if (performance.now() >= ticket.validUntil) {
        // Stalled between the wait and here: later tickets may already be going past this one.
        await this.giveUp(ticket);
        ticket = undefined;
        held.ticket = undefined;
        continue;
      }
      const sent = performance.now();
      // Over a release of epoch m (our own, or one seen by the wait: either way known before the
      // reads are sent): an announcement that lands over it proves that nobody announced in
      // between, and every write of a store's nodes is made under an announced lease, by a holder
      // that releases only once its writes are answered. So nothing in the store changed since
      // that release: reads sent together with the announcement see what they would see after
      // it, and are valid once it lands. (Not over a lease that ran out: its holder may be
      // writing still.)
      const reading = early && (over as { leaseReleased?: unknown }).leaseReleased === true ? early() : undefined;
      reading?.catch(() => {});
      // Announced only over the lease as it was seen free: a holder whose late renewal landed in
      // between keeps it (StoreLease.keep relies on this). The reservation rides with it: the
      // previous holder gave its unused ids back in the same write that released the lease.
      const doc = await this.stores.findOneAndUpdate(
        over,
        {
          $set: { leaseEpoch: ticket.epoch, leaseUntil: Date.now() + this.options.lease, leaseReleased: false },
          ...(reserve > 0 ? { $inc: { lastEventId: reserve } } : {}),
        },
        { returnDocument: "after" },
      );
      over = undefined;
      if (!doc) {
        const s = await this.stores.findOne({ _id: store }, { projection: { leaseEpoch: 1 } });
        if (!s) throw new NotFoundError(`store ${store} not found`);
        // The holder renewed: wait for it again with the same ticket. A later epoch announced
        // means the ticket was stale (its epoch had been collected and the insert took it
        // again): queue again after the announced one.
        if ((s.leaseEpoch ?? 0) >= ticket.epoch) {
          ticket = undefined;
          held.ticket = undefined;
        }
        continue;
      }
      const before = doc.lastEventId - reserve;
      const lease = new StoreLease(this.stores, this.options, store, ticket.epoch, sent, {
        before,
        reserved: doc.lastEventId,
      });
      doc.lastEventId = before;
      try {
        if (doc.committedEventId < before) {
          // A holder died (or ran out) with ids allocated and maybe unwritten: publishing them is
          // safe, since it writes no more (gaps are allowed, holes are not). A holder that
          // released gave back what it did not hand out, so this happens only after a failure.
          await this.stores.updateOne(lease.fence, { $max: { committedEventId: before } });
          doc.committedEventId = before;
        }
        return { doc, lease, early: reading ? await reading : undefined };
      } catch (err) {
        // Announced, then failed (the database went away): release at once, which gives the
        // reservation back; if that fails too, acquire's clean-up frees the lease later, and
        // the next holder publishes the reservation as a gap.
        await this.release(lease).then(
          () => {
            held.released = true;
          },
          () => {},
        );
        throw err;
      }
    }
  }

  /**
   * Retries a release that failed (the database was away) once a second while the lease lasts,
   * so that what the holder committed is published without waiting for the next writer.
   */
  releaseLater(lease: StoreLease, log: StorageLogger): void {
    this.retry(async () => {
      await this.release(lease);
      log.info({ store: lease.store }, "released a store's write lease after a failure");
    });
  }

  /** Runs `write` once a second until it succeeds, for as long as a lease lasts (then it no longer matters). */
  private retry(write: () => Promise<unknown>): void {
    const until = performance.now() + this.options.lockTimeout + this.options.lease;
    const attempt = () => {
      write().catch(() => {
        if (performance.now() < until) setTimeout(attempt, 1000).unref();
      });
    };
    setTimeout(attempt, 0).unref();
  }

  /**
   * Publishes the ids the holder handed out, gives back the ones it reserved and did not, and
   * frees the lease; one write. The next holder announces only over `leaseReleased: true` (or a
   * lease run out), so it sees the ids given back, never a reservation of this one's.
   */
  async release(lease: StoreLease): Promise<void> {
    const res = await this.stores.updateOne(lease.fence, {
      $set: { leaseReleased: true, ...(lease.unused ? { lastEventId: lease.used } : {}) },
      ...(lease.used > 0 ? { $max: { committedEventId: lease.used } } : {}),
    });
    if (res.matchedCount === 1) this.lastReleased.set(lease.store, lease.epoch);
  }

  /**
   * Removes the tickets of epochs before each store's announced one: nobody reads them again.
   * (A process whose last release is older may insert one of those epochs again; its
   * announcement then fails, and it queues after the announced epoch.)
   */
  async collectGarbage(): Promise<number> {
    let removed = 0;
    const stores = await this.stores.find({ leaseEpoch: { $gt: 1 } }, { projection: { leaseEpoch: 1 } }).toArray();
    for (const s of stores) {
      const res = await this.tickets.deleteMany({ store: s._id, epoch: { $lt: s.leaseEpoch as number } });
      removed += res.deletedCount;
    }
    return removed;
  }

  /**
   * The first epoch after the announced one that nobody holds a ticket for; with the lease's
   * fields as read before, when the epoch is the one right after them (no ticket between to look
   * at): what the wait would read first, since only this ticket's holder can announce that epoch.
   */
  private async takeTicket(
    store: string,
    known?: LeaseState,
  ): Promise<{ ticket: Ticket; seen: LeaseState | undefined }> {
    const s = known ?? (await this.readLease(store));
    if (!s) throw new NotFoundError(`store ${store} not found`);
    const next = (s.leaseEpoch ?? 0) + 1;
    for (let epoch = next; ; epoch++) {
      const ticket = await this.insertTicket(store, epoch);
      if (ticket) return { ticket, seen: epoch === next ? s : undefined };
    }
  }

  private readLease(store: string): Promise<LeaseState | null> {
    return this.stores.findOne({ _id: store }, { projection: LEASE_STATE });
  }

  private async insertTicket(store: string, epoch: number): Promise<Ticket | undefined> {
    const sent = performance.now();
    // Others skip an unannounced ticket once `until` is past; this process stops using it a
    // third of a lease earlier (the margin for clock skew and stalls, as for the lease itself).
    const until = Date.now() + this.options.lockTimeout + this.options.lease / 3;
    try {
      await this.tickets.insertOne({ _id: ticketId(store, epoch), store, epoch, owner: this.owner, until });
    } catch (err) {
      if (isDuplicateKey(err)) return undefined;
      // The insert may have landed with its answer lost (the database went away): a ticket of
      // ours would then hold up every later writer until its `until`. Give it up, if it is ours.
      this.retry(() => this.giveUp({ store, epoch, validUntil: 0 }));
      throw err;
    }
    return { store, epoch, validUntil: sent + this.options.lockTimeout };
  }

  /**
   * Polls until every earlier epoch is done, and returns the store document's lease fields as
   * seen then (the announcement's filter); undefined when the ticket turns out stale.
   */
  private async waitForTurn(
    ticket: Ticket,
    deadline: number,
    first?: LeaseState,
  ): Promise<Filter<LeaseFields> | undefined> {
    const { store, epoch } = ticket;
    let seen = first;
    for (let wait = 2; ; wait = Math.min(wait * 2, 25)) {
      const s = seen ?? (await this.readLease(store));
      seen = undefined;
      if (!s) throw new NotFoundError(`store ${store} not found`);
      const announced = s.leaseEpoch ?? 0;
      if (announced >= epoch) return undefined;
      const now = Date.now();
      let free = announced === 0 || s.leaseReleased === true || (s.leaseUntil ?? 0) <= now;
      for (let e = announced + 1; free && e < epoch; e++) {
        const t = await this.tickets.findOne({ _id: ticketId(store, e) });
        free = !t || t.released === true || t.until <= now;
      }
      if (free) {
        if (s.leaseEpoch === undefined) return { _id: store, leaseEpoch: { $exists: false } };
        if (s.leaseReleased === true) return { _id: store, leaseEpoch: announced, leaseReleased: true };
        return { _id: store, leaseEpoch: announced, leaseUntil: s.leaseUntil ?? { $exists: false } };
      }
      if (performance.now() + wait > deadline) {
        await this.giveUp(ticket);
        throw this.busy(store);
      }
      await sleep(wait);
    }
  }

  /** Lets later tickets go past this one. */
  /** Lets later tickets go past this one (only if it is this process's: an epoch may be taken by another). */
  private async giveUp(ticket: Ticket): Promise<void> {
    await this.tickets.updateOne(
      { _id: ticketId(ticket.store, ticket.epoch), owner: this.owner },
      { $set: { released: true } },
    );
  }

  private busy(store: string): UnavailableError {
    return new UnavailableError(
      `store ${store} is busy: its write lease was not free within ${this.options.lockTimeout} ms`,
    );
  }
}
