// Access checks shared by the services: each asks the caller's one decision (auth/caller.ts).

import type { Caller, Operation, Target } from "../auth/caller.js";
import { PermissionDeniedError } from "../domain/errors.js";

export function requireOperation(caller: Caller, operation: Operation, target: Target): void {
  if (!caller.may(operation, target)) {
    throw new PermissionDeniedError(`${caller.subject} may not ${operation} /${target.path} in store ${target.store}`);
  }
}

export function requirePermission(caller: Caller, permission: string): void {
  if (!caller.holds(permission)) {
    throw new PermissionDeniedError(`${caller.subject} lacks the permission ${permission}`);
  }
}
