// What every `trove` client command is made of: its context, exit codes, and output.

import type { ParseArgsConfig } from "node:util";
import type { TroveRestClient } from "../rest/client.js";
import type { CliConfig } from "./config.js";

/** Exit codes a script can rely on. */
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
export interface CliIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WriteStream;
  stdin: NodeJS.ReadableStream;
  env: NodeJS.ProcessEnv;
  /** Aborted on SIGINT / SIGTERM: watch and mirror stop and exit 0. */
  signal?: AbortSignal;
}

export interface Command {
  help: string;
  options: ParseArgsConfig["options"];
  run(ctx: Context): Promise<number>;
}

export interface Context {
  io: CliIo;
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  config: CliConfig;
  rest(): Promise<TroveRestClient>;
  progress: boolean;
}

export function out(io: CliIo, text: string): void {
  io.stdout.write(text);
}
