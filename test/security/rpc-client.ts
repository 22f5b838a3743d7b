// Raw requests on any face, for the security suites: what a hand-made client sends and sees,
// with no client library smoothing the bytes either way.

import * as http from "node:http";
import * as http2 from "node:http2";

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  trailers: Record<string, string>;
  body: Buffer;
}

function flat(headers: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : String(v);
  }
  return out;
}

/** One request over an h2c session the caller owns (and closes). */
export function h2Request(
  session: http2.ClientHttp2Session,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Uint8Array,
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": method, ":path": path, ...headers }, { endStream: body === undefined });
    const chunks: Buffer[] = [];
    let status = 0;
    let responseHeaders: Record<string, string> = {};
    let trailers: Record<string, string> = {};
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      responseHeaders = flat(h);
    });
    stream.on("trailers", (t) => {
      trailers = flat(t);
    });
    stream.on("data", (c: Buffer) => chunks.push(c));
    const answer = () => ({ status, headers: responseHeaders, trailers, body: Buffer.concat(chunks) });
    stream.on("end", () => resolve(answer()));
    // A server may reset the stream behind a complete answer (a body it will not read): the answer stands.
    stream.on("error", (err) => (status !== 0 ? resolve(answer()) : reject(err)));
    stream.on("close", () => {
      if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR && status === 0) {
        reject(new Error(`stream reset (${stream.rstCode})`));
      }
    });
    if (body !== undefined) stream.end(body);
  });
}

/** One HTTP/1.1 request on a fresh connection. */
export function h1Request(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Uint8Array,
  agent?: http.Agent,
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    // Always framed: Node sends a TRACE, DELETE or OPTIONS body unframed otherwise.
    const framed =
      body === undefined || headers["content-length"] !== undefined
        ? headers
        : { ...headers, "content-length": String(body.byteLength) };
    const req = http.request(
      { host: "127.0.0.1", port, method, path, headers: framed, agent: agent ?? false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: flat(res.headers),
            trailers: flat(res.trailers),
            body: Buffer.concat(chunks),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** A gRPC / gRPC-Web / Connect-streaming envelope. */
export function envelope(data: Uint8Array, flags = 0): Buffer {
  const out = Buffer.alloc(5 + data.byteLength);
  out[0] = flags;
  out.writeUInt32BE(data.byteLength, 1);
  out.set(data, 5);
  return out;
}

/** The envelopes of an enveloped body. */
export function envelopes(body: Buffer): Array<{ flags: number; data: Buffer }> {
  const out: Array<{ flags: number; data: Buffer }> = [];
  let i = 0;
  while (i + 5 <= body.length) {
    const length = body.readUInt32BE(i + 1);
    out.push({ flags: body[i] as number, data: body.subarray(i + 5, i + 5 + length) });
    i += 5 + length;
  }
  return out;
}

/** The gRPC-Web trailers (the last envelope, flag 0x80) as a header map. */
export function grpcWebTrailers(body: Buffer): Record<string, string> {
  const last = envelopes(body).find((e) => e.flags & 0x80);
  const out: Record<string, string> = {};
  for (const line of (last?.data.toString() ?? "").split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0) out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return out;
}
