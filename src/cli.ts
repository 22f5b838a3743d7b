// The `trove` command.

import { fetchDevToken, parseTokenArgs, TOKEN_HELP } from "./auth/token-command.js";
import { parseServeArgs, SERVE_HELP } from "./server/config.js";
import { serveUntilSignal } from "./server/main.js";
import { TROVE_VERSION } from "./version.js";

const HELP = `Usage: trove <command> [options]

Commands:
  serve     run the Trove server (trove serve --help)
  token     print a bearer token from a development server (trove token --help)
  ls, get, put, rm, mkdir, stores, watch, mirror, project, report
            client commands, from @trove/sdk (trove <command> --help; sdk/README.md)

Run "trove <command> --help" for a command's options.
"trove --version" prints the version of the server and of the client commands.
`;

/** The server's version, and the client commands' (@trove/sdk) when they are installed. */
async function versionText(): Promise<string> {
  let sdk = "";
  try {
    const sdkCli = "@trove/sdk/cli";
    const { SDK_VERSION } = (await import(sdkCli)) as { SDK_VERSION?: string };
    if (SDK_VERSION) sdk = `@trove/sdk ${SDK_VERSION} (client commands)\n`;
  } catch {
    // The client commands are not installed beside the server.
  }
  return `trove ${TROVE_VERSION}\n${sdk}`;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(HELP);
    return command === undefined ? 2 : 0;
  }
  if (command === "--version" || command === "-V" || command === "version") {
    process.stdout.write(await versionText());
    return 0;
  }
  if (command === "serve") {
    const config = parseServeArgs(args, process.env);
    if (config === "help") {
      process.stdout.write(SERVE_HELP);
      return 0;
    }
    return serveUntilSignal(config);
  }
  if (command === "token") {
    const config = parseTokenArgs(args, process.env);
    if (config === "help") {
      process.stdout.write(TOKEN_HELP);
      return 0;
    }
    process.stdout.write(`${await fetchDevToken(config)}\n`);
    return 0;
  }
  if (SDK_COMMANDS.has(command)) {
    // Not a literal import: the server builds without the SDK's types (sdk/dist is built beside it).
    const sdkCli = "@trove/sdk/cli";
    const { run } = (await import(sdkCli)) as { run(argv: string[]): Promise<number> };
    return run(argv);
  }
  process.stderr.write(`trove: unknown command ${JSON.stringify(command)}\n\n${HELP}`);
  return 2;
}

/** Client commands, run by the SDK's CLI (sdk/src/cli). */
const SDK_COMMANDS = new Set(["ls", "get", "put", "rm", "mkdir", "stores", "watch", "mirror", "project", "report"]);

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`trove: ${err.message}\n`);
    process.exit(1);
  },
);
