// The answers of blob contents one HTTP/2 session may have in progress at once (issue 31,
// docs/security.md "HTTP/2 sessions"). Node's HTTP/2 server counts the data queued for a client
// against the session's `maxSessionMemory` and refuses every new stream (ENHANCE_YOUR_CALM) while
// it is over: a client that asked for a dozen 1 MiB files at once and reads them slowly had its
// next requests refused. That limit is also no bound: streams opened together are all admitted
// before any answer is queued. So the answers that read a blob file take a turn instead: a few run
// at once per session, the others wait (the client sees their answers later, never a refusal), and
// what one session makes the server buffer is bounded by the turns, whatever its streams.

import type { Http2ServerResponse, Http2Session } from "node:http2";
import { READ_MESSAGE_CHUNK } from "../services/read-contents.js";
import { INLINE_MAX } from "../storage/local/blob-files.js";

/** Answers read from blob files that one HTTP/2 session has in progress at once; the rest wait. */
export const H2_CONTENT_TURNS = 8;

/** A response waiting for a turn, and how to let it go on. */
interface Waiting {
  res: Http2ServerResponse;
  go: () => void;
}

/** One session's turns: how many are taken, and who waits, in the order they came. */
interface SessionTurns {
  taken: number;
  waiting: Waiting[];
}

const bySession = new WeakMap<Http2Session, SessionTurns>();
/** The responses holding a turn: one each, however many times their call reads a blob (a retry). */
const holding = new WeakSet<Http2ServerResponse>();

function turnsOf(session: Http2Session): SessionTurns {
  let turns = bySession.get(session);
  if (turns === undefined) {
    turns = { taken: 0, waiting: [] };
    bySession.set(session, turns);
  }
  return turns;
}

/**
 * Takes a turn for `res` among its session's content answers: undefined when one was free (taken
 * at once, no asynchronous hop), else a promise that settles when one is (or when the response
 * closed while it waited: the caller finds its client gone). The turn is held until the response
 * closes, that is until its last byte has left the server or the stream was reset.
 */
export function takeContentsTurn(res: Http2ServerResponse): Promise<void> | undefined {
  const session = res.stream.session;
  if (holding.has(res) || res.closed || session === undefined || session.destroyed) return undefined;
  const turns = turnsOf(session);
  if (turns.taken < H2_CONTENT_TURNS) {
    hold(turns, res);
    return undefined;
  }
  return new Promise<void>((resolve) => {
    const waiting: Waiting = { res, go: resolve };
    turns.waiting.push(waiting);
    // Gone while it waited: out of the queue, and the caller goes on to find its client gone.
    res.once("close", () => {
      const at = turns.waiting.indexOf(waiting);
      if (at >= 0) {
        turns.waiting.splice(at, 1);
        resolve();
      }
    });
  });
}

function hold(turns: SessionTurns, res: Http2ServerResponse): void {
  holding.add(res);
  turns.taken += 1;
  res.once("close", () => {
    turns.taken -= 1;
    const next = turns.waiting.shift();
    if (next !== undefined) {
      hold(turns, next.res);
      next.go();
    }
  });
}

/**
 * Node's `maxSessionMemory` (megabytes of 10^6 bytes) for sessions of `maxConcurrentStreams`: above
 * what a session can make the server queue, so that a client within the limits is never refused.
 * The content answers in their turns queue at most two chunks of 1 MiB each (the chunk written and
 * the next: storage reads and Read messages are at most READ_MESSAGE_CHUNK), the other answers of
 * a file are inline (at most INLINE_MAX each, one per stream), and 8 MB is left for the rest Node
 * counts (header tables, streams, SETTINGS and PINGs not acknowledged yet). 42 MB at the default
 * 256 streams.
 */
export function sessionMemoryMegabytes(maxConcurrentStreams: number): number {
  const bytes = H2_CONTENT_TURNS * 2 * READ_MESSAGE_CHUNK + maxConcurrentStreams * INLINE_MAX + 8_000_000;
  return Math.ceil(bytes / 1_000_000);
}
