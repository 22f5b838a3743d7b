// trove serve's options (issue 29 review: one option table): each is named once, by its flag, in
// OPTIONS (src/server/config.ts); its environment variable, its key and its --help line derive from
// it. README.md's table is checked against --help by test/readme/configuration-table.test.ts.

import { availableParallelism } from "node:os";
import { describe, expect, it } from "vitest";
import { envName, keyOf, OPTIONS, parseServeArgs, SERVE_HELP, type ServeConfig } from "../../src/server/config.js";

const capacity = () => ({ openFiles: 20_000, memory: 24 * 2 ** 30 });
const cores = availableParallelism();
const parse = (args: string[], env: NodeJS.ProcessEnv = {}) => parseServeArgs(args, env, capacity) as ServeConfig;

describe("one option table (issue 29 review)", () => {
  it("derives the environment variable and the key from the flag; a no- switch names the option it turns off", () => {
    expect([envName("poll-wait"), keyOf("poll-wait")]).toEqual(["TROVE_POLL_WAIT", "pollWait"]);
    expect([envName("max-long-lived-per-caller"), keyOf("max-long-lived-per-caller")]).toEqual([
      "TROVE_MAX_LONG_LIVED_PER_CALLER",
      "maxLongLivedPerCaller",
    ]);
    expect([envName("no-report-worker"), keyOf("no-report-worker")]).toEqual(["TROVE_REPORT_WORKER", "reportWorker"]);
    // The two keys that are not their flag in camelCase.
    expect([keyOf("data"), keyOf("cors-origin")]).toEqual(["dataDir", "corsOrigins"]);
  });

  it("every option of the table has its line in --help, with its environment variable", () => {
    for (const flag of Object.keys(OPTIONS)) {
      expect(SERVE_HELP, flag).toMatch(new RegExp(`\\n  --${flag}[ \\n]`));
      expect(SERVE_HELP.replaceAll(/\s+/g, " "), flag).toContain(envName(flag));
    }
  });

  it("without flags or environment, every option has the default --help states", () => {
    expect(parse([])).toEqual({
      host: "127.0.0.1",
      port: 13242,
      dataDir: ".trove-data",
      logLevel: "info",
      logBuffer: 8 * 1024 * 1024,
      maxResourceSize: 4294967296,
      pollWait: 30_000,
      mongodbUrl: undefined,
      mongodbDatabase: "trove",
      filesystemScanLease: 30_000,
      sqliteSynchronous: "normal",
      issuer: undefined,
      audience: "trove",
      tokenLifetime: 600,
      reportAvailability: 90 * 86_400_000,
      reportWorker: true,
      metrics: true,
      shutdownTimeout: 10_000,
      corsOrigins: [],
      consoleClientId: "trove-console",
      // --workers auto: one per core, and the connection budgets split between them.
      workers: cores,
      limits: {
        firstByteTimeout: 10_000,
        headersTimeout: 20_000,
        keepAliveTimeout: 15_000,
        sessionIdleTimeout: 30_000,
        maxConcurrentStreams: 256,
        maxConnections: Math.ceil(15_795 / cores),
        maxLongLived: Math.ceil(12_636 / cores),
        minBodyRate: 500,
        maxLongLivedPerCaller: 1000,
        maxLongLivedUnauthenticated: 100,
      },
    });
  });

  it("a flag wins over its environment variable, which wins over the default; errors name the option", () => {
    expect(parse([], { TROVE_POLL_WAIT: "5" }).pollWait).toBe(5000);
    expect(parse(["--poll-wait", "7"], { TROVE_POLL_WAIT: "5" }).pollWait).toBe(7000);
    expect(parse([], { TROVE_HEADERS_TIMEOUT: "3" }).limits.headersTimeout).toBe(3000);
    expect(parse([], { TROVE_REPORT_WORKER: "false" }).reportWorker).toBe(false);
    expect(parse([], { TROVE_REPORT_WORKER: "yes" }).reportWorker).toBe(true);
    expect(parse(["--no-report-worker"]).reportWorker).toBe(false);
    expect(parse([], { TROVE_CORS_ORIGIN: " https://a.example, https://b.example ," }).corsOrigins).toEqual([
      "https://a.example",
      "https://b.example",
    ]);
    expect(
      parse(["--cors-origin", "https://c.example"], { TROVE_CORS_ORIGIN: "https://a.example" }).corsOrigins,
    ).toEqual(["https://c.example"]);
    expect(parse([], { TROVE_MONGODB_URL: "" }).mongodbUrl).toBeUndefined();
    expect(() => parse(["--keep-alive-timeout", "0"])).toThrow(
      'keep-alive-timeout must be a whole number from 1 to 86400, not "0"',
    );
    expect(() => parse([], { TROVE_MIN_BODY_RATE: "-1" })).toThrow(
      'min-body-rate must be a whole number from 0 to 1000000000, not "-1"',
    );
    expect(() => parse(["--issuer", "ftp://x"])).toThrow('--issuer must be an http:// or https:// URL, not "ftp://x"');
    expect(() => parse(["--mongodb-url", "http://x"])).toThrow(
      "--mongodb-url must start with mongodb:// or mongodb+srv://",
    );
    expect(() => parse(["--report-availability", "soon"])).toThrow(
      '--report-availability must be a duration such as 90d, 12h or 3600, not "soon"',
    );
    expect(() => parse(["--audience", ""])).toThrow("audience must not be empty");
    expect(() => parse(["--max-connections", "auto", "--max-long-lived", "20000"])).toThrow(
      "--max-long-lived (20000) must be below --max-connections (15795): short requests need the connections left over",
    );
  });
});
