// Who is calling, and what they may do. Until token verification lands, every
// caller is anonymous with full access; services ask this module only.

import { createContextKey } from "@connectrpc/connect";

export type Operation = "read" | "write" | "delete";
export const OPERATIONS: readonly Operation[] = ["read", "write", "delete"];

export interface Caller {
  /** Subject of the token, or "anonymous". */
  readonly subject: string;
  readonly account: string;
  /** Whether the caller may perform an operation on a path of a store. */
  may(operation: Operation, store: string, path: string): boolean;
  /** Whether the caller holds a permission such as store administration. */
  holds(permission: string): boolean;
}

export const anonymousCaller: Caller = {
  subject: "anonymous",
  account: "",
  may: () => true,
  holds: () => true,
};

export const callerKey = createContextKey<Caller>(anonymousCaller, { description: "the authenticated caller" });

export function accessOf(caller: Caller, store: string, path: string): Operation[] {
  return OPERATIONS.filter((op) => caller.may(op, store, path));
}
