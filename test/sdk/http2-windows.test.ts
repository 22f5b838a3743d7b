// What a server sees of createTroveClient's HTTP/2 receive windows (issue 14): the stream window in
// the client's SETTINGS and the connection window raised by a WINDOW_UPDATE, for gRPC and for
// Connect over HTTP/2, the defaults and chosen sizes; a size HTTP/2 cannot announce is refused.
// The peer is a node:http2 server that answers ListStores with an empty list.

import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTroveClient, HTTP2_RECEIVE_WINDOW, type Protocol } from "../../sdk/src/index.js";

const MiB = 1024 * 1024;

/** What the server saw of one client's session when its first call arrived. */
interface Seen {
  streamWindow: number | undefined;
  connectionWindow: number | undefined;
}

/** Waits for a condition, checking every 10 ms, for up to 10 s; answers whether it was met. */
async function until(condition: () => boolean): Promise<boolean> {
  for (const deadline = Date.now() + 10_000; !condition(); ) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

describe("createTroveClient's HTTP/2 receive windows (issue 14)", () => {
  let server: http2.Http2Server;
  let url = "";
  const seen: Seen[] = [];
  const sessions = new Set<http2.ServerHttp2Session>();

  beforeAll(async () => {
    server = http2.createServer();
    server.on("session", (session) => {
      sessions.add(session);
      session.once("close", () => sessions.delete(session));
    });
    server.on("stream", async (stream, headers) => {
      const session = stream.session as http2.ServerHttp2Session;
      // The client's WINDOW_UPDATE for the connection follows its first HEADERS: wait for it.
      await until(() => (session.state.remoteWindowSize ?? 0) > 65_535);
      seen.push({
        streamWindow: session.remoteSettings.initialWindowSize,
        connectionWindow: session.state.remoteWindowSize,
      });
      const type = String(headers["content-type"]);
      // One message of 0 bytes (an empty ListStoresResponse), then the status in the protocol's way.
      if (type.startsWith("application/grpc-web")) {
        const trailer = Buffer.from("grpc-status: 0\r\n");
        const frame = Buffer.alloc(5);
        frame[0] = 0x80;
        frame.writeUInt32BE(trailer.length, 1);
        stream.respond({ ":status": 200, "content-type": "application/grpc-web+proto" });
        stream.end(Buffer.concat([Buffer.alloc(5), frame, trailer]));
      } else if (type.startsWith("application/grpc")) {
        stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(Buffer.alloc(5));
      } else {
        stream.respond({ ":status": 200, "content-type": "application/proto" });
        stream.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server?.close(resolve));
  });

  for (const protocol of ["grpc", "connect", "grpc-web"] as Protocol[]) {
    it(`${protocol} over HTTP/2 announces 8 MiB per stream and 16 MiB for the connection by default`, async () => {
      const client = createTroveClient({ baseUrl: url, protocol });
      try {
        seen.length = 0;
        const answer = await client.stores.listStores({});
        expect(answer.stores).toEqual([]);
        expect(seen).toEqual([{ streamWindow: 8 * MiB, connectionWindow: 16 * MiB }]);
        expect(HTTP2_RECEIVE_WINDOW).toEqual({ stream: 8 * MiB, connection: 16 * MiB });
      } finally {
        client.close();
      }
    });
  }

  it("receiveWindow chooses both sizes; a second call on the same connection sees them still", async () => {
    const client = createTroveClient({
      baseUrl: url,
      protocol: "grpc",
      receiveWindow: { stream: 1 * MiB, connection: 2 * MiB },
    });
    try {
      seen.length = 0;
      await client.stores.listStores({});
      await client.stores.listStores({});
      expect(seen.map((s) => s.streamWindow)).toEqual([1 * MiB, 1 * MiB]);
      expect(seen[0]?.connectionWindow).toBe(2 * MiB);
      // Less the 5 bytes of the first answer, not yet given back (WINDOW_UPDATE comes at half the window).
      expect(seen[1]?.connectionWindow).toBeGreaterThan(2 * MiB - 64);
      expect(seen[1]?.connectionWindow).toBeLessThanOrEqual(2 * MiB);
    } finally {
      client.close();
    }
  });

  it("a window HTTP/2 cannot announce is refused with the option's name, before any connection", () => {
    const before = sessions.size;
    for (const [receiveWindow, name] of [
      [{ stream: 1000 }, "stream"],
      [{ connection: 2 ** 31 }, "connection"],
      [{ stream: 1.5 * MiB + 0.5 }, "stream"],
    ] as const) {
      expect(() => createTroveClient({ baseUrl: url, protocol: "grpc", receiveWindow })).toThrow(
        new RegExp(`^receiveWindow\\.${name} must be an integer from 65535 to 2147483647`),
      );
    }
    expect(sessions.size).toBe(before);
  });
});
