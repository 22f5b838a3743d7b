// README.md's configuration table (Flag, Environment, Default) against what `trove serve --help`
// prints: a flag or an environment variable in one and not in the other fails, and so does a
// default that both state differently.

import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { ROOT, ROOT_BIN } from "../sdk/build.js";

interface Option {
  flag: string;
  env?: string;
  /** The default as written, when one is stated. */
  default?: string;
}

/** The rows of the table under README.md's "## Configuration". */
function tableOptions(readme: string): Option[] {
  const section = readme.slice(readme.indexOf("\n## Configuration\n"));
  const rows = section
    .split("\n")
    .slice(2)
    .filter((l, i, all) => l.startsWith("|") && all.slice(0, i).every((p) => p.startsWith("|") || p === ""));
  const [header, , ...body] = rows;
  const columns = cells(header as string);
  expect(columns.slice(0, 3)).toEqual(["Flag", "Environment", "Default"]);
  return body.map((row) => {
    const [flag, env, def] = cells(row);
    const option: Option = { flag: (/--[a-z0-9-]+/.exec(flag as string) ?? [row])[0] };
    const envName = /TROVE_[A-Z0-9_]+/.exec(env as string)?.[0];
    if (envName) option.env = envName;
    // `value` states a default; "(none)" or "(worker on)" does not.
    const stated = /^`([^`]*)`$/.exec((def as string).trim());
    if (stated) option.default = (stated[1] as string).replace(/^\.\//, "");
    return option;
  });
}

/** The options `trove serve --help` lists, each with the environment variable and default it names. */
function helpOptions(help: string): Option[] {
  const entries: string[] = [];
  for (const line of help.split("\n")) {
    if (/^ {2}(-h, )?--[a-z]/.test(line)) entries.push(line);
    else if (/^ {10,}\S/.test(line) && entries.length > 0) entries[entries.length - 1] += ` ${line.trim()}`;
    else if (line.trim() !== "" && entries.length > 0 && !/^ /.test(line)) entries.push("");
  }
  return entries
    .filter((e) => e !== "" && !/^ {2}-h, --help/.test(e))
    .map((e) => {
      const option: Option = { flag: (/--[a-z0-9-]+/.exec(e) as RegExpExecArray)[0] };
      const env = /TROVE_[A-Z0-9_]+/.exec(e)?.[0];
      if (env) option.env = env;
      const def = /\bdefault ([^\s;,)]+)/.exec(e)?.[1];
      if (def && def !== "none") option.default = def.replace(/^\.\//, "");
      return option;
    });
}

function cells(row: string): string[] {
  return row
    .replace(/^\||\|$/g, "")
    .split("|")
    .map((c) => c.trim());
}

let table: Option[];
let help: Option[];

beforeAll(async () => {
  table = tableOptions(await readFile(join(ROOT, "README.md"), "utf8"));
  const { stdout } = await promisify(execFile)(process.execPath, [ROOT_BIN, "serve", "--help"], { cwd: ROOT });
  help = helpOptions(stdout);
});

describe("README.md's configuration table and trove serve --help", () => {
  it("both are read", () => {
    expect(table.length).toBeGreaterThanOrEqual(20);
    expect(help.length).toBeGreaterThanOrEqual(20);
    expect(help.find((o) => o.flag === "--port")).toEqual({ flag: "--port", env: "TROVE_PORT", default: "13242" });
  });

  it("list the same flags and environment variables", () => {
    const missing = (from: Option[], in_: Option[], key: "flag" | "env") =>
      from.map((o) => o[key]).filter((k) => k !== undefined && !in_.some((o) => o[key] === k));
    expect(missing(help, table, "flag"), "flags of --help missing from README.md's table").toEqual([]);
    expect(missing(table, help, "flag"), "flags of README.md's table that --help does not list").toEqual([]);
    expect(missing(help, table, "env"), "environment variables of --help missing from README.md's table").toEqual([]);
    expect(missing(table, help, "env"), "environment variables of README.md's table that --help does not list").toEqual(
      [],
    );
  });

  it("give each flag the same environment variable", () => {
    for (const row of table) {
      const listed = help.find((o) => o.flag === row.flag);
      expect(row.env, `README.md's ${row.flag}`).toBe(listed?.env);
    }
  });

  it("state the same defaults where both state one", () => {
    for (const row of table) {
      const listed = help.find((o) => o.flag === row.flag);
      if (row.default === undefined || listed?.default === undefined) continue;
      expect(row.default, `README.md's default of ${row.flag}`).toBe(listed.default);
    }
  });
});
