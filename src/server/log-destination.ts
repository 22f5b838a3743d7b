// Where `trove serve` writes its log: stdout, through pino's own asynchronous writer (SonicBoom),
// with the lines waiting to be written bounded. Pino's default has no bound: when whatever reads
// stdout stops reading (a stalled log shipper, a full disk under the collector, a terminal held by
// Ctrl-S), every request's line waits in memory, about 200 bytes a request, until the process runs
// out of memory. With a bound, lines beyond it are dropped and counted
// (trove_log_lines_dropped_total); once stdout takes lines again, one warning says how many were
// lost. The server never waits for its log. docs/operations.md, "Logs".

import { type DestinationStream, destination } from "pino";
import { DEFAULT_LOG_BUFFER } from "./limits.js";

export interface LogOutput {
  readonly stream: DestinationStream;
  /** Lines dropped since the process started, the buffer being full. */
  dropped(): number;
  /**
   * Calls `tell` with the number of lines dropped since the last call, each time stdout has taken
   * every waiting line after some were dropped (the moment a warning can be written again).
   */
  onDropsEnded(tell: (dropped: number) => void): void;
}

let output: LogOutput | undefined;

/** This process's log output on stdout: made once, with the bound of its first call. */
export function stdoutLog(maxBytes = DEFAULT_LOG_BUFFER): LogOutput {
  if (output) return output;
  const stream = destination({ dest: 1, sync: false, minLength: 0, maxLength: maxBytes });
  let dropped = 0;
  let unreported = 0;
  const tellers: ((dropped: number) => void)[] = [];
  stream.on("drop", () => {
    dropped += 1;
    unreported += 1;
  });
  // Emitted when a write completes with nothing left waiting.
  stream.on("drain", () => {
    if (unreported === 0) return;
    const count = unreported;
    unreported = 0;
    for (const tell of tellers) tell(count);
  });
  output = {
    stream,
    dropped: () => dropped,
    onDropsEnded: (tell) => {
      tellers.push(tell);
    },
  };
  return output;
}
