// Long-lived work the core finds on its way (docs/security.md, "Long-lived work"): a download is
// known to be large only once its node is read. The server's budgets decide (src/server/fair-share.ts);
// the core only claims a place, before it sends a byte of the contents.

import { type ConnectError, createContextKey, type HandlerContext } from "@connectrpc/connect";

/** A transfer at least this large (an upload announced so, a download whose node says so) is long-lived work. */
export const LARGE_TRANSFER_BYTES = 1024 * 1024;

/** A place in the long-lived budgets that a call may claim once it knows it is long-lived. */
export interface LongLivedClaim {
  /**
   * Takes a place for the call (once: a second claim holds nothing more), or returns the refusal:
   * UNAVAILABLE beyond the server's budget, RESOURCE_EXHAUSTED beyond the caller's share.
   */
  claim(): ConnectError | undefined;
  /**
   * Before a blob's contents are read: undefined when the call may go on at once, else a promise
   * that settles when it may (a connection that bounds its answers in progress, HTTP/2).
   */
  contentsTurn?(): Promise<void> | undefined;
}

/** The call's claim; none where no budget applies (in-process calls, tests of the cores). */
export const longLivedClaimKey = createContextKey<LongLivedClaim | undefined>(undefined, {
  description: "the call's place in the long-lived budgets",
});

/** Where the server leaves a request's claim, read by the faces' context values: a field of the request. */
export interface ClaimingRequest {
  longLivedClaim?: LongLivedClaim | undefined;
}

/** The claim the server left on a request, if any. */
export function claimOf(req: unknown): LongLivedClaim | undefined {
  return (req as ClaimingRequest).longLivedClaim;
}

/**
 * Before the contents of `size` bytes are sent: a large download takes a place in the long-lived
 * budgets like a poll or an upload, or its refusal is thrown (nothing of the contents is read).
 */
export function claimLargeTransfer(ctx: HandlerContext, size: number): void {
  if (size < LARGE_TRANSFER_BYTES) return;
  const refusal = ctx.values.get(longLivedClaimKey)?.claim();
  if (refusal) throw refusal;
}

/**
 * Before a blob's contents are read (every face): waits for the call's turn among its connection's
 * answers, if the server bounds them (src/server/answer-turns.ts); no asynchronous hop when free.
 */
export function contentsTurn(ctx: HandlerContext): Promise<void> | undefined {
  return ctx.values.get(longLivedClaimKey)?.contentsTurn?.();
}
