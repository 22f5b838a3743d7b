// Issue 17, item 7: --filesystem-scan-lease (TROVE_FILESYSTEM_SCAN_LEASE), the scan lease of
// filesystem stores on MongoDB, in whole seconds; a bad value is refused with the reason.

import { describe, expect, test } from "vitest";
import { parseServeArgs, type ServeConfig } from "../../src/server/config.js";

const parse = (args: string[], env: NodeJS.ProcessEnv = {}) => parseServeArgs(args, env) as ServeConfig;

describe("--filesystem-scan-lease (issue 17, item 7)", () => {
  test("30 s by default; the flag, else the environment variable, in seconds", () => {
    expect(parse([]).filesystemScanLease).toBe(30_000);
    expect(parse(["--filesystem-scan-lease", "5"]).filesystemScanLease).toBe(5_000);
    expect(parse([], { TROVE_FILESYSTEM_SCAN_LEASE: "7" }).filesystemScanLease).toBe(7_000);
    expect(parse(["--filesystem-scan-lease", "9"], { TROVE_FILESYSTEM_SCAN_LEASE: "7" }).filesystemScanLease).toBe(
      9_000,
    );
  });

  test("a value that is not a whole number of seconds from 1 to 3600 is refused with the reason", () => {
    for (const bad of ["0", "3601", "1.5", "ten", ""]) {
      expect(() => parse(["--filesystem-scan-lease", bad])).toThrow(
        `filesystem-scan-lease must be a whole number from 1 to 3600, not ${JSON.stringify(bad)}`,
      );
    }
  });
});
