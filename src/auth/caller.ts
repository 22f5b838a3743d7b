// Who is calling, and what they may do. Services ask this module only; the
// caller comes from a verified token (claims.ts) or, for tests, is anonymous.

import { createContextKey } from "@connectrpc/connect";

export type Operation = "read" | "write" | "delete";
export const OPERATIONS: readonly Operation[] = ["read", "write", "delete"];

export interface Caller {
  /** Subject of the token, "anonymous" or "nobody". */
  readonly subject: string;
  /** The account the caller belongs to ("" when the token names none). */
  readonly account: string;
  /** Whether the caller may perform an operation on a path of a store ("" is the root). */
  may(operation: Operation, store: string, path: string): boolean;
  /**
   * Whether a read grant covers the path itself. `may("read", …)` is also true for the
   * directories on the way to a grant (so that the caller can list down to it); a file's
   * contents need this stricter answer.
   */
  mayReadFile(store: string, path: string): boolean;
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
  mayReadFile: () => true,
  holds: () => true,
  mayProject: () => true,
};

/** No access at all: what a handler sees when authentication did not set a caller. */
export const nobody: Caller = {
  subject: "nobody",
  account: "",
  may: () => false,
  mayReadFile: () => false,
  holds: () => false,
  mayProject: () => false,
};

export const callerKey = createContextKey<Caller>(nobody, { description: "the authenticated caller" });

export function accessOf(caller: Caller, store: string, path: string): Operation[] {
  return OPERATIONS.filter((op) => caller.may(op, store, path));
}
