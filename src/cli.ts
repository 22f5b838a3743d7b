// The `trove` command of the server package: `serve`, `backup`, the archive form of `restore`,
// and every client command (token, ls, get, put, ...) from @trove/sdk's CLI, which parses,
// dispatches and maps errors to the one exit-code table (EXIT, docs/cli.md) for both.
// A command's implementation is imported when it runs: `trove --version`, `help` and the client
// commands start without the server, the storage adapters, protobuf or Connect (docs/cli.md,
// "Start-up"; bench/cli-startup.js).

import { EXIT, type HostCommand, run, SDK_VERSION } from "@trove/sdk/cli";
import { BACKUP_COMMAND, RESTORE_COMMAND } from "./backup/command-help.js";
import { SERVE_HELP } from "./server/config.js";
import { TROVE_VERSION } from "./version.js";

/** serve's options as its help lists them (`--name VALUE` takes a value), for shell completion. */
function optionsOfHelp(help: string): HostCommand["options"] {
  const options: NonNullable<HostCommand["options"]> = {};
  for (const m of help.matchAll(/^ {2}(?:-([a-zA-Z]), )?--([a-z][a-z-]*)( [A-Z])?/gm)) {
    options[m[2] as string] = { type: m[3] ? "string" : "boolean", ...(m[1] ? { short: m[1] } : {}) };
  }
  return options;
}

/** A command described now (help, options, summary) whose `run` is imported when it runs. */
function loadedWhenRun(described: Omit<HostCommand, "run">, load: () => Promise<HostCommand["run"]>): HostCommand {
  return { ...described, run: async (args, io) => (await load())(args, io) };
}

const SERVE = loadedWhenRun(
  {
    summary: "run the Trove server                 trove serve --port 13242",
    help: SERVE_HELP,
    options: optionsOfHelp(SERVE_HELP),
  },
  async () => (await import("./server/serve-command.js")).serve,
);

const BACKUP = loadedWhenRun(BACKUP_COMMAND, async () => (await import("./backup/commands.js")).backup);
const RESTORE = loadedWhenRun(RESTORE_COMMAND, async () => (await import("./backup/commands.js")).restore);

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
