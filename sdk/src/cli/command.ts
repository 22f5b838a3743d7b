// What every `trove` client command is made of: its context, exit codes, and output.

import type { ParseArgsConfig } from "node:util";
import type { TroveRestClient } from "../rest/client.js";
import type { CliConfig } from "./config.js";

/** Exit codes a script can rely on, for every command of both bins (docs/cli.md). */
export const EXIT = {
  ok: 0,
  error: 1,
  usage: 2,
  notFound: 3,
  preconditionFailed: 4,
  unauthorized: 5,
  forbidden: 6,
  unavailable: 7,
  conflict: 8,
} as const;

/** What each exit code means, in a word or two, for --help (docs/cli.md has every case). */
export const EXIT_MEANING: Record<(typeof EXIT)[keyof typeof EXIT], string> = {
  0: "ok",
  1: "error (also: a report that failed)",
  2: "usage",
  3: "not found (or deleted, or a moment older than the history kept)",
  4: "precondition failed",
  5: "not authenticated or not authorized",
  6: "forbidden",
  7: "server unreachable or unavailable",
  8: "conflict (a name already taken; with --api-version 1, rm of a directory that is not empty)",
};
export interface CliIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WriteStream;
  stdin: NodeJS.ReadableStream;
  env: NodeJS.ProcessEnv;
  /** Aborted on SIGINT / SIGTERM: watch and mirror stop and exit 0. */
  signal?: AbortSignal;
}

/**
 * The positional arguments that name something on the server, for shell completion (0-based,
 * options not counted): a STORE/PATH, or a store's name ("all": every positional argument).
 */
export interface RemoteArguments {
  paths?: number[];
  stores?: number[] | "all";
}

export interface Command {
  help: string;
  options: ParseArgsConfig["options"];
  /** What shell completion asks the server for (docs/cli.md, "Shell completion"). */
  remote?: RemoteArguments;
  run(ctx: Context): Promise<number>;
}

/**
 * A command that `run` does not implement but dispatches for the package that calls it: the
 * server package's `serve`. It takes no connection options; it parses its own arguments, throws
 * UsageError for a usage mistake, and answers an exit code of EXIT.
 */
export interface HostCommand {
  /** One line for the top-level help. */
  summary: string;
  help: string;
  /** Its options, for shell completion (the command parses its arguments itself). */
  options: ParseArgsConfig["options"];
  run(args: string[], io: CliIo): Promise<number>;
}

/** What the package that calls `run` adds: its commands, and its own --version text. */
export interface CliHost {
  commands?: Record<string, HostCommand>;
  version?: () => Promise<string>;
}

export interface Context {
  io: CliIo;
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  config: CliConfig;
  /**
   * The REST client of the connection options. With `h2c`, the one for many requests at once
   * (push, pull, mirror): over one HTTP/2 connection when the server speaks h2c, else HTTP/1.1.
   */
  rest(options?: { h2c?: boolean }): Promise<TroveRestClient>;
  /**
   * Whether the client's last answer came from a directory it was redirected to: the server
   * answers GET or HEAD of a directory named without its trailing / with 303 to it.
   */
  answeredByDirectory(): boolean;
  /**
   * -q: print nothing but errors, as rclone's and rsync's -q (docs/cli.md, "Quiet"): no progress
   * bar, no summary line, no notice (a skipped link); what a command is asked for (its output on
   * stdout, a dry run's actions, -v's lines) and every error still print.
   */
  quiet: boolean;
}

export function out(io: CliIo, text: string): void {
  io.stdout.write(text);
}

/**
 * Rows as lines whose columns line up: each column as wide as its widest cell in this listing,
 * two spaces apart; columns in `right` are right-aligned (sizes); no trailing spaces.
 */
export function columns(rows: string[][], right: ReadonlySet<number> = new Set()): string[] {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows.map((row) =>
    row
      .map((cell, i) => (right.has(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd(),
  );
}
