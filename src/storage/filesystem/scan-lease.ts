// The scan lease of filesystem stores (issue 17, item 7): when several instances serve the same
// folder (a shared file system, one database), one of them at a time watches and rescans it; all
// of them serve reads and writes. An adapter that is shared by instances provides the lease
// (MongoDB: src/storage/mongodb/mongo-scan-lease.ts); one that is not (SQLite) needs none.

export interface ScanLease {
  /**
   * How long a holder keeps the lease without renewing it, in milliseconds. Holders renew, and the
   * others try to take it, every third of it; a holder scans only while two thirds of it have not
   * passed since its last renewal was sent (the margin for clock skew and stalls).
   */
  readonly duration: number;
  /** Takes the store's lease if it is free (released, or run out), renews it if this instance holds it; true while held. */
  hold(store: string): Promise<boolean>;
  /** Frees the store's lease if this instance holds it (shutdown, store deleted), so another takes over at once. */
  release(store: string): Promise<void>;
}
