// The external command-line tools some suites run (grpcurl, grpc-health-probe, FerretDB): where
// each is found (its environment variable, then .ci/run's cache, then PATH), and a describe that
// says which tool is missing and how to install it. Under CI=true a missing tool fails the suite;
// so does any other missing need of a suite (describeWithNeed: a MongoDB server, mongodb.ts).

import { accessSync, constants } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { describe, it } from "vitest";

export interface Tool {
  /** The command's name, e.g. grpcurl. */
  name: string;
  /** The environment variable that names the binary (.ci/run exports it). */
  env: string;
  /** The Go module `go install` builds it from, and the version .ci/run installs. */
  module: string;
  version: string;
  /** How to get it where `go install {module}@{version}` does not work; default: that command. */
  install?: string;
}

export const GRPCURL: Tool = {
  name: "grpcurl",
  env: "TROVE_TEST_GRPCURL_BIN",
  module: "github.com/fullstorydev/grpcurl/cmd/grpcurl",
  version: "v1.9.3",
};

export const GRPC_HEALTH_PROBE: Tool = {
  name: "grpc-health-probe",
  env: "TROVE_TEST_GRPC_HEALTH_PROBE_BIN",
  module: "github.com/grpc-ecosystem/grpc-health-probe",
  version: "v0.4.61",
};

/** FerretDB (a MongoDB wire-protocol server on SQLite), for the suites that start their own (ferretdb.ts). */
export const FERRETDB: Tool = {
  name: "ferretdb",
  env: "TROVE_TEST_FERRETDB_BIN",
  module: "github.com/FerretDB/FerretDB/cmd/ferretdb",
  version: "v1.24.2",
  // The Go module proxy refuses the module's version list, which `go install` reads (docs/mongodb.md).
  install: "`bash .ci/build-ferretdb` (which `bash .ci/run` runs too) builds it from the Go module cache into",
};

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Where .ci/run caches the tool: ${XDG_CACHE_HOME:-$HOME/.cache}/trove/<name>-<version>. */
export function cachePath(tool: Tool): string {
  const cache = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(cache, "trove", `${tool.name}-${tool.version}`);
}

/** The tool's binary: the environment variable's, else the cached one, else the one on PATH; undefined if none. */
export function findTool(tool: Tool): string | undefined {
  const named = process.env[tool.env];
  if (named) return executable(named) ? named : undefined;
  const cached = cachePath(tool);
  if (executable(cached)) return cached;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir && executable(join(dir, tool.name))) return join(dir, tool.name);
  }
  return undefined;
}

/** How to get the tool, for the message of a suite that cannot run. */
export function installHint(tool: Tool): string {
  const missing = `${tool.name} ${tool.version} not found (${tool.env}, ${cachePath(tool)}, PATH).`;
  if (tool.install) return `${missing} ${tool.install} ${cachePath(tool)}`;
  return (
    `${missing} Install it with \`bash .ci/run\` (which caches it), or: GOBIN=/tmp/bin go install ` +
    `${tool.module}@${tool.version} && cp /tmp/bin/${tool.name} ${cachePath(tool)}`
  );
}

/**
 * `describe(title, body)` with the tool's path, when the tool is found. When it is not: under
 * CI=true the suite holds one failing test that names the tool and how to install it; elsewhere
 * the suite is reported as not run, with that message in its title and on stderr.
 */
export function describeWithTool(tool: Tool, title: string, body: (path: string) => void): void {
  describeWithNeed(tool.name, findTool(tool), installHint(tool), title, body);
}

/**
 * `describe(title, body)` with what the suite needs from outside the test run (`found`: a tool's
 * path, a server's URL), when it is there. When it is not (undefined): under CI=true the suite
 * holds one failing test, "needs {need}", whose error is `hint` (what is missing, how to get it),
 * so that a CI run never passes without it; elsewhere the suite is reported as skipped, with the
 * need in its title and the hint on stderr. `body` must not use `found` before its tests run: it
 * is called with "" to list the skipped tests.
 */
export function describeWithNeed(
  need: string,
  found: string | undefined,
  hint: string,
  title: string,
  body: (found: string) => void,
): void {
  if (found !== undefined) {
    describe(title, () => body(found));
    return;
  }
  if (process.env.CI === "true") {
    describe(title, () => {
      it(`needs ${need}`, () => {
        throw new Error(hint);
      });
    });
    return;
  }
  console.warn(`${title}: NOT RUN: ${hint}`);
  describe.skip(`${title} (NOT RUN: ${need} missing)`, () => body(""));
}
