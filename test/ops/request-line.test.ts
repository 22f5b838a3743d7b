// The request log's line written from one template (issue 32, session 14): the same line pino
// writes for the same fields (docs/operations.md, "Logs"), and pino itself wherever its
// configuration would write the line otherwise.

import pino, { type Logger, type LoggerOptions } from "pino";
import { describe, expect, it } from "vitest";
import { requestLineWriter } from "../../src/server/request-line.js";

/** A logger at a fixed time whose lines are kept, as the server's child logger of a worker is made. */
function kept(options: LoggerOptions = {}): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const root = pino(
    { level: "info", timestamp: () => ',"time":1795838858161', ...options },
    { write: (s) => lines.push(s) },
  );
  return { logger: root.child({ worker: 2 }), lines };
}

const cases: Array<[string, Parameters<NonNullable<ReturnType<typeof requestLineWriter>>>]> = [
  ["a GET", ["0df68785-4", "GET", "/resources/v2/data/home/a.bin", 200, "dev-user", 0.4]],
  ["no caller (a refusal)", ["0df68785-5", "HEAD", "/resources/v2/data/home/a.bin", 401, undefined, 12]],
  [
    "quotes, backslashes and control bytes from the client",
    ['id "with" \\ quotes', "G\u0001T", '/a"b\\c\u0007d\u00e9\ud800', 400, 'sub "x"', 1.5],
  ],
  ["no method nor target", ["0df68785-6", undefined, undefined, 400, "alice", 0]],
];

describe("the request line (docs/operations.md, Logs)", () => {
  it.each(cases)("is the line pino writes for the same fields: %s", (_name, args) => {
    const { logger, lines } = kept();
    const write = requestLineWriter(logger);
    expect(write).toBeDefined();
    write?.(...args);
    const [req, method, url, status, caller, ms] = args;
    logger.info({ req, method, url, status, caller, ms }, "request");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe(lines[1]);
    expect(JSON.parse(lines[0] as string)).toEqual({
      level: 30,
      time: 1795838858161,
      pid: process.pid,
      hostname: expect.any(String),
      worker: 2,
      req,
      ...(method === undefined ? {} : { method }),
      ...(url === undefined ? {} : { url }),
      status,
      ...(caller === undefined ? {} : { caller }),
      ms,
      msg: "request",
    });
  });

  it.each<[string, LoggerOptions]>([
    ["a mixin", { mixin: () => ({ extra: 1 }) }],
    ["a log formatter", { formatters: { log: (o) => ({ ...o, extra: 1 }) } }],
    ["a nested key", { nestedKey: "payload" }],
    ["another message key", { messageKey: "message" }],
    ["a serializer of one of its fields", { serializers: { url: () => "hidden" } }],
    ["a redaction of one of its fields", { redact: ["url"] }],
  ])("is left to pino where its configuration writes lines otherwise: %s", (_name, options) => {
    expect(requestLineWriter(kept(options).logger)).toBeUndefined();
  });
});
