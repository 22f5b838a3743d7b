// The `trove` command of the server package: `serve`, and every client command (token, ls, get,
// put, ...) from @trove/sdk's CLI, which parses, dispatches and maps errors to the one exit-code
// table (EXIT, docs/cli.md) for both.

import { type CliIo, EXIT, type HostCommand, run, SDK_VERSION, UsageError } from "@trove/sdk/cli";
import { BACKUP, RESTORE } from "./backup/commands.js";
import { UnavailableError } from "./domain/errors.js";
import { parseServeArgs, SERVE_HELP, type ServeConfig } from "./server/config.js";
import { isDataDirError } from "./server/data-dir.js";
import { TROVE_VERSION } from "./version.js";

/** serve's options as its help lists them (`--name VALUE` takes a value), for shell completion. */
function optionsOfHelp(help: string): HostCommand["options"] {
  const options: NonNullable<HostCommand["options"]> = {};
  for (const m of help.matchAll(/^ {2}(?:-([a-zA-Z]), )?--([a-z][a-z-]*)( [A-Z])?/gm)) {
    options[m[2] as string] = { type: m[3] ? "string" : "boolean", ...(m[1] ? { short: m[1] } : {}) };
  }
  return options;
}

const SERVE: HostCommand = {
  summary: "run the Trove server                 trove serve --port 13242",
  help: SERVE_HELP,
  options: optionsOfHelp(SERVE_HELP),
  async run(args: string[], io: CliIo): Promise<number> {
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
      // The server's modules load for serve only: a backup or a client command starts without them.
      const { serveUntilSignal } = await import("./server/main.js");
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
  },
};

run(process.argv.slice(2), undefined, {
  commands: { serve: SERVE, backup: BACKUP, restore: RESTORE },
  // The server's version and the client commands' (@trove/sdk).
  version: async () => `trove ${TROVE_VERSION}\n@trove/sdk ${SDK_VERSION} (client commands)\n`,
}).then(
  (code) => process.stdout.write("", () => process.exit(code)),
  (err: Error) => {
    process.stderr.write(`trove: ${err.message}\n`);
    process.exit(EXIT.error);
  },
);
