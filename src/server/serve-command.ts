// `trove serve`: parses its arguments and runs the server until a signal. src/cli.ts loads this
// module only when serve runs, so the client commands start without the server's modules.

import { type CliIo, EXIT, UsageError } from "@trove/sdk/cli";
import { UnavailableError } from "../domain/errors.js";
import { parseServeArgs, SERVE_HELP, type ServeConfig } from "./config.js";
import { isDataDirError } from "./data-dir.js";
import { serveUntilSignal } from "./main.js";

export async function serve(args: string[], io: CliIo): Promise<number> {
  let config: ServeConfig | "help";
  try {
    // Pure: every error is about the arguments or the environment variables.
    config = parseServeArgs(args, io.env);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (config === "help") {
    io.stdout.write(SERVE_HELP);
    return EXIT.ok;
  }
  // The client commands' SIGINT / SIGTERM listeners (io.signal, for watch and mirror) are not
  // serve's: without a listener, a signal during start-up ends the process by its default
  // action, even where start-up waits in a system call. serveUntilSignal adds its own once it
  // serves (docs/operations.md, "Shutdown").
  process.removeAllListeners("SIGINT");
  process.removeAllListeners("SIGTERM");
  try {
    return await serveUntilSignal(config);
  } catch (err) {
    // The data directory cannot be used: exit 1. The storage cannot be reached (MongoDB):
    // exit 7. Anything else (a port in use, ...) is an error.
    if (isDataDirError(err)) {
      io.stderr.write(`trove serve: ${err.message}\n`);
      return EXIT.error;
    }
    if (!(err instanceof UnavailableError)) throw err;
    io.stderr.write(`trove serve: ${err.message}\n`);
    return EXIT.unavailable;
  }
}
