// Access checks shared by the services.

import type { Caller, Operation } from "../auth/caller.js";
import { PermissionDeniedError } from "../domain/errors.js";

export function requireOperation(caller: Caller, operation: Operation, store: string, path: string): void {
  if (!caller.may(operation, store, path)) {
    throw new PermissionDeniedError(`${caller.subject} may not ${operation} /${path} in store ${store}`);
  }
}

export function requirePermission(caller: Caller, permission: string): void {
  if (!caller.holds(permission)) {
    throw new PermissionDeniedError(`${caller.subject} lacks the permission ${permission}`);
  }
}
