// createTroveClient over each protocol against a real server that requires tokens:
// every service answers, the bearer interceptor renews a refused token on unary
// calls, and Connect errors become the SDK's typed errors.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clientCredentials,
  createRestClient,
  createTroveClient,
  DeletedError,
  fromConnectError,
  NotFoundError,
  PreconditionFailedError,
  type Protocol,
  SERVICES,
} from "../../sdk/src/index.js";
import { countingFetch, type DevServer, rejection, startDevServer } from "./support.js";

describe("createTroveClient", () => {
  let server: DevServer;

  beforeAll(async () => {
    server = await startDevServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  const auth = () =>
    clientCredentials({ tokenUrl: server.tokenUrl, clientId: server.clientId, clientSecret: server.clientSecret });

  it("has a client for every service the SDK lists", () => {
    const client = createTroveClient({ baseUrl: server.url, auth: auth() });
    expect(Object.keys(SERVICES)).toEqual(expect.arrayContaining(["changes", "resources", "stores"]));
    for (const name of Object.keys(SERVICES)) expect(client).toHaveProperty(name);
    client.close();
  });

  for (const [protocol, httpVersion] of [
    ["connect", "2"],
    ["connect", "1.1"],
    ["grpc", "2"],
    ["grpc-web", "2"],
    ["grpc-web", "1.1"],
  ] as Array<[Protocol, "1.1" | "2"]>) {
    it(`${protocol} over HTTP/${httpVersion}: stores, a streamed write and read, list, poll and typed errors`, async () => {
      const client = createTroveClient({ baseUrl: server.url, auth: auth(), protocol, httpVersion });
      try {
        const { stores } = await client.stores.listStores({});
        expect(stores.map((s) => s.name)).toContain("home");
        const dir = `${protocol}-${httpVersion}`;
        await client.resources.makeDirectory({ store: "home", path: dir });
        const chunks = [new Uint8Array([1, 2]), new Uint8Array([3])];
        const written = await client.resources.write(
          (async function* () {
            yield { part: { case: "header" as const, value: { store: "home", path: `${dir}/x.bin` } } };
            for (const chunk of chunks) yield { part: { case: "chunk" as const, value: chunk } };
          })(),
        );
        expect(written.created).toBe(true);
        const read: number[] = [];
        for await (const part of client.resources.read({ store: "home", path: `${dir}/x.bin` }))
          read.push(...part.chunk);
        expect(read).toEqual([1, 2, 3]);
        const listed: string[] = [];
        for await (const page of client.resources.list({ store: "home", path: dir })) {
          listed.push(...page.entries.map((e) => e.name));
        }
        expect(listed).toEqual(["x.bin"]);
        const { events } = await client.changes.poll({ cursors: [] });
        expect(events.some((e) => e.kind.case === "reset" && e.kind.value.store === "home")).toBe(true);

        const missing = fromConnectError(await rejection(client.resources.stat({ store: "home", path: `${dir}/no` })));
        expect(missing).toBeInstanceOf(NotFoundError);
        expect(missing).not.toBeInstanceOf(DeletedError);
        const removed = await client.resources.delete({ store: "home", path: `${dir}/x.bin` });
        const deleted = fromConnectError(
          await rejection(client.resources.stat({ store: "home", path: `${dir}/x.bin` })),
        );
        expect(deleted).toBeInstanceOf(DeletedError);
        expect((deleted as DeletedError).tag).toBe(removed.resource?.tag);
        const stale = fromConnectError(
          await rejection(client.resources.delete({ store: "home", path: dir, ifMatch: ["nope"] })),
        );
        expect(stale).toBeInstanceOf(PreconditionFailedError);
      } finally {
        client.close();
      }
    });
  }

  it("the tags seen over gRPC are those of the REST face", async () => {
    const client = createTroveClient({ baseUrl: server.url, auth: auth(), protocol: "grpc" });
    const rest = createRestClient({ baseUrl: server.url, auth: auth() });
    const put = await rest.put("home", "same.txt", "same");
    const { resource } = await client.resources.stat({ store: "home", path: "same.txt" });
    expect(resource?.tag).toBe(put.tag);
    client.close();
  });

  it("a unary call refused as Unauthenticated is retried once with a new token", async () => {
    const counter = countingFetch();
    let first = true;
    const tokenFetch: typeof fetch = (input, init) => {
      if (first) {
        first = false;
        void counter.fetch(input, init);
        return Promise.resolve(Response.json({ access_token: "stale", token_type: "Bearer", expires_in: 600 }));
      }
      return counter.fetch(input, init);
    };
    const provider = clientCredentials({
      tokenUrl: server.tokenUrl,
      clientId: server.clientId,
      clientSecret: server.clientSecret,
      fetch: tokenFetch,
    });
    const client = createTroveClient({ baseUrl: server.url, auth: provider, protocol: "grpc" });
    const { stores } = await client.stores.listStores({});
    expect(stores.length).toBeGreaterThan(0);
    await client.stores.listStores({});
    expect(counter.tokenRequests()).toBe(2);
    client.close();
  });
});
