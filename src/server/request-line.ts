// The request log's line (one per request at info, docs/operations.md "Logs"), written as pino
// writes a line but from one template: pino's generic path walks a fields object key by key,
// checks each value's type and quotes it, about 1.5 µs a line; this about 1 µs (issue 32, session 14).
// Used only where the logger writes lines exactly as the template does; otherwise `undefined`, and
// the request log calls pino as any other line.

import pino, { type Logger } from "pino";

/** Writes one request line: the request id, method, target, status, caller (when known) and milliseconds. */
export type RequestLineWriter = (
  id: string,
  method: string | undefined,
  url: string | undefined,
  status: number,
  caller: string | undefined,
  ms: number,
) => void;

const FIELDS = ["req", "method", "url", "status", "caller", "ms"];

/** What pino keeps on a logger under its documented symbols (pino.symbols), as far as the template needs. */
interface PinoState {
  [pino.symbols.lsCacheSym]: Record<number, string>;
  [pino.symbols.timeSym]: () => string;
  [pino.symbols.chindingsSym]: string;
  [pino.symbols.endSym]: string;
  [pino.symbols.streamSym]: pino.DestinationStream & { [pino.symbols.needsMetadataGsym]?: boolean };
  [pino.symbols.messageKeySym]: string;
  [pino.symbols.nestedKeySym]: string | null;
  [pino.symbols.mixinSym]: unknown;
  [pino.symbols.hooksSym]: { streamWrite?: unknown };
  [pino.symbols.formattersSym]: { log?: unknown };
  [pino.symbols.serializersSym]: Record<string, unknown>;
  [pino.symbols.stringifiersSym]: Record<string | symbol, unknown>;
}

const quoted = (text: string | undefined, name: string) =>
  text === undefined ? "" : `,"${name}":${JSON.stringify(text)}`;

/**
 * The request line's writer for `logger`, or undefined when pino would write it otherwise: a mixin,
 * a log formatter, a stream hook, a nested key, a message key other than `msg`, a serializer or a
 * redaction of one of its fields, or a stream that needs each line's level (multistream).
 */
export function requestLineWriter(logger: Logger): RequestLineWriter | undefined {
  const s = logger as unknown as PinoState;
  const stream = s[pino.symbols.streamSym];
  const serializers = s[pino.symbols.serializersSym];
  const stringifiers = s[pino.symbols.stringifiersSym];
  if (
    s[pino.symbols.mixinSym] ||
    s[pino.symbols.hooksSym].streamWrite ||
    s[pino.symbols.formattersSym].log ||
    s[pino.symbols.nestedKeySym] ||
    s[pino.symbols.messageKeySym] !== "msg" ||
    stream[pino.symbols.needsMetadataGsym] === true ||
    FIELDS.some((field) => serializers[field] !== undefined || stringifiers[field] !== undefined) ||
    stringifiers[pino.symbols.wildcardFirstSym] !== undefined
  ) {
    return undefined;
  }
  const level = s[pino.symbols.lsCacheSym][logger.levels.values.info as number];
  if (level === undefined) return undefined;
  const time = s[pino.symbols.timeSym];
  const end = `,"msg":"request"${s[pino.symbols.endSym]}`;
  return (id, method, url, status, caller, ms) => {
    stream.write(
      `${level}${time()}${s[pino.symbols.chindingsSym]},"req":${JSON.stringify(id)}${quoted(method, "method")}${quoted(url, "url")},"status":${status}${quoted(caller, "caller")},"ms":${ms}${end}`,
    );
  };
}
