// How a call whose signal aborted ends: never with OK, which would tell a gRPC, Connect or
// gRPC-Web client that a watch or a long poll ended normally.

import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";

/**
 * The error that ends a call whose signal aborted: DEADLINE_EXCEEDED when the client's deadline
 * (grpc-timeout, connect-timeout-ms) ran out, CANCELLED when the client went away (it observes
 * its own cancellation), the given ConnectError for any other reason.
 */
export function abortedCallError(ctx: HandlerContext): ConnectError {
  const reason: unknown = ctx.signal.reason;
  if (reason instanceof ConnectError) return reason;
  return new ConnectError("the call was cancelled", Code.Canceled, undefined, undefined, reason);
}

/** Throws abortedCallError when the call's signal aborted: every long wait checks it when it wakes. */
export function throwIfCallAborted(ctx: HandlerContext): void {
  if (ctx.signal.aborted) throw abortedCallError(ctx);
}
