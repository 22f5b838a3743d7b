// Who is calling, and what they may do. Services ask this module only; the
// caller comes from a verified token (claims.ts) or, for tests, is anonymous.

import { createContextKey } from "@connectrpc/connect";

export type Operation = "read" | "write" | "delete";
export const OPERATIONS: readonly Operation[] = ["read", "write", "delete"];

/**
 * What an access decision is about: a node of a store ("" is the root). `directory` says what
 * the node is; it is absent only when the node has not been looked up yet, and then the answer
 * is the most the caller could be allowed there (the decision is asked again with the node).
 * A NodeRecord is a Target.
 */
export interface Target {
  readonly store: string;
  readonly path: string;
  readonly directory?: boolean | undefined;
}

export interface Caller {
  /** Subject of the token, "anonymous" or "nobody". */
  readonly subject: string;
  /** The account the caller belongs to ("" when the token names none). */
  readonly account: string;
  /**
   * The one decision on a store's contents: whether the caller may perform an operation on a
   * node. Direct reads, listings (their entries and `access` attribute), recursive listings,
   * the change feed, promotion and environment creation all ask it, so that what one of them
   * refuses no other shows.
   */
  may(operation: Operation, target: Target): boolean;
  /** Whether the caller holds a permission such as store administration. */
  holds(permission: string): boolean;
  /** Whether the caller may perform an operation on a project, `project://{account}/{name}`. */
  mayProject(operation: Operation, account: string, project: string): boolean;
}

/**
 * Full access without credentials. Only a server built explicitly with
 * `auth: "anonymous"` (tests, the auth-off benchmark) has such callers; the CLI never does.
 */
export const anonymousCaller: Caller = {
  subject: "anonymous",
  account: "",
  may: () => true,
  holds: () => true,
  mayProject: () => true,
};

/** No access at all: what a handler sees when authentication did not set a caller. */
export const nobody: Caller = {
  subject: "nobody",
  account: "",
  may: () => false,
  holds: () => false,
  mayProject: () => false,
};

export const callerKey = createContextKey<Caller>(nobody, { description: "the authenticated caller" });

/** The operations the caller may perform on a node: the `access` attribute of listings. */
export function accessOf(caller: Caller, target: Target): Operation[] {
  return OPERATIONS.filter((op) => caller.may(op, target));
}

/** A store's root, which is always a directory. */
export function rootOf(store: string): Target {
  return { store, path: "", directory: true };
}
