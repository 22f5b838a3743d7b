// ResourceService.ReadMany (docs/rest.md, "Reading many resources at once"; issue 31): each
// path answered in the request's order with Read's messages and Read's decision, a path's error
// as its own message while the others go on, and the limits refused before anything is read.
// On Connect and gRPC, against a server that checks tokens and grants.

import { Code, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, type AuthServer, bearer, codeOf, type Issuer, startAuthServer, startIssuer } from "./support.js";

let issuer: Issuer;
let t: AuthServer;
/** A file over the inline limit, so that it is read from a blob in chunks. */
const large = Buffer.alloc(3 * 1024 * 1024 + 17, "large ");

beforeAll(async () => {
  issuer = await startIssuer();
  t = await startAuthServer(issuer);
  const admin = await issuer.token(ADMIN);
  for (const dir of ["docs/", "docs/sub/", "private/"]) {
    expect((await t.call("PUT", `/resources/v2/data/home/${dir}`, admin)).status).toBe(201);
  }
  for (const [path, body] of [
    ["docs/a.txt", "alpha"],
    ["docs/b.txt", "beta"],
    ["docs/sub/c.txt", "gamma"],
    ["private/p.txt", "secret"],
    ["docs/gone.txt", "soon gone"],
  ]) {
    expect((await t.call("PUT", `/resources/v2/data/home/${path}`, admin, { body })).status).toBe(201);
  }
  expect((await t.call("PUT", "/resources/v2/data/home/docs/large.bin", admin, { body: large })).status).toBe(201);
  expect((await t.call("DELETE", "/resources/v2/data/home/docs/gone.txt", admin)).status).toBe(200);
});
afterAll(async () => {
  await t?.stop();
  await issuer?.stop();
});

const TRANSPORTS: Record<string, (token: string) => Transport> = {
  Connect: (token) => createConnectTransport({ baseUrl: t.url, httpVersion: "2", interceptors: [bearer(token)] }),
  gRPC: (token) => createGrpcTransport({ baseUrl: t.url, interceptors: [bearer(token)] }),
};

interface Answer {
  /** The path's bytes (its chunks joined), with the tag and size of its first message. */
  bytes?: Buffer;
  tag?: string;
  size?: bigint;
  directory?: boolean;
  error?: [string, string];
}

/** The answers of a ReadMany by index, and the order in which indexes first appeared. */
async function readMany(transport: Transport, store: string, paths: string[]) {
  const answers = new Map<number, Answer>();
  const order: number[] = [];
  for await (const m of createClient(ResourceService, transport).readMany({ store, paths })) {
    let answer = answers.get(m.index);
    if (answer === undefined) {
      answer = {};
      answers.set(m.index, answer);
      order.push(m.index);
    }
    if (m.errorCode !== "") {
      answer.error = [m.errorCode, m.errorMessage];
      continue;
    }
    const read = m.read;
    if (read?.resource) {
      answer.tag = read.resource.tag;
      answer.size = read.resource.size;
      answer.directory = read.resource.directory;
    }
    answer.bytes = Buffer.concat([answer.bytes ?? Buffer.alloc(0), read?.chunk ?? Buffer.alloc(0)]);
  }
  return { answers, order };
}

describe.each(Object.keys(TRANSPORTS))("ReadMany over %s", (name) => {
  const transport = (token: string) => (TRANSPORTS[name] as (t: string) => Transport)(token);

  it("answers every path in the request's order with Read's bytes and tags, a blob in chunks", async () => {
    const admin = transport(await issuer.token(ADMIN));
    const paths = ["docs/b.txt", "docs/large.bin", "docs/a.txt", "docs/sub", "docs/sub/c.txt", "docs/b.txt"];
    const { answers, order } = await readMany(admin, "home", paths);
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    expect(answers.get(0)?.bytes?.toString()).toBe("beta");
    expect(answers.get(1)?.bytes?.equals(large)).toBe(true);
    expect(answers.get(1)?.size).toBe(BigInt(large.length));
    expect(answers.get(2)?.bytes?.toString()).toBe("alpha");
    expect(answers.get(3)).toMatchObject({ directory: true, bytes: Buffer.alloc(0) });
    expect(answers.get(4)?.bytes?.toString()).toBe("gamma");
    expect(answers.get(5)?.bytes?.toString()).toBe("beta");
    // The tags are the ones a Read (and a REST GET) gives.
    const one = createClient(ResourceService, admin);
    for await (const m of one.read({ store: "home", path: "docs/a.txt" })) {
      if (m.resource) expect(answers.get(2)?.tag).toBe(m.resource.tag);
    }
  });

  it("a path's error is its own message with Read's code, and the next paths are still read", async () => {
    const admin = transport(await issuer.token(ADMIN));
    const { answers, order } = await readMany(admin, "home", [
      "docs/missing.txt",
      "docs/a.txt",
      "docs/gone.txt",
      "../escape",
      "docs/b.txt",
    ]);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(answers.get(0)?.error).toEqual(["not_found", "/docs/missing.txt not found in store home"]);
    expect(answers.get(1)?.bytes?.toString()).toBe("alpha");
    expect(answers.get(2)?.error?.[0]).toBe("not_found");
    expect(answers.get(3)?.error?.[0]).toBe("invalid_argument");
    expect(answers.get(4)?.bytes?.toString()).toBe("beta");
  });

  it("the same decision as Read: a grant on docs/ reads docs/ and is refused the rest, path by path", async () => {
    const reader = transport(await issuer.token({ trove_grants: [{ store: "home", path: "docs", ops: ["read"] }] }));
    const { answers } = await readMany(reader, "home", ["private/p.txt", "docs/a.txt"]);
    expect(answers.get(0)?.error).toEqual(["permission_denied", "alice may not read /private/p.txt in store home"]);
    expect(answers.get(0)?.bytes).toBeUndefined();
    expect(answers.get(1)?.bytes?.toString()).toBe("alpha");
    // Another store's every path: refused, as a Read of it is.
    const other = await readMany(reader, "brand", ["x.txt"]);
    expect(other.answers.get(0)?.error).toEqual(["permission_denied", "alice may not read /x.txt in store brand"]);
  });

  it("no token: Unauthenticated before anything is read", async () => {
    const anonymous = createClient(
      ResourceService,
      name === "gRPC"
        ? createGrpcTransport({ baseUrl: t.url })
        : createConnectTransport({ baseUrl: t.url, httpVersion: "2" }),
    );
    expect(
      await codeOf(async () => {
        for await (const _ of anonymous.readMany({ store: "home", paths: ["docs/a.txt"] })) {
          // nothing: the call is refused
        }
      }),
    ).toEqual([Code.Unauthenticated, "authentication required: send Authorization: Bearer <token>"]);
  });

  it("more than 1,000 paths or a bad store name: InvalidArgument before any path is read", async () => {
    const admin = createClient(ResourceService, transport(await issuer.token(ADMIN)));
    const drain = async (paths: string[], store = "home") => {
      for await (const _ of admin.readMany({ store, paths })) {
        // nothing is expected
      }
    };
    expect(await codeOf(() => drain(Array.from({ length: 1001 }, () => "docs/a.txt")))).toEqual([
      Code.InvalidArgument,
      "a ReadMany names at most 1000 paths, not 1001",
    ]);
    expect((await codeOf(() => drain(["docs/a.txt"], "no such/store")))[0]).toBe(Code.InvalidArgument);
    // Exactly 1,000 is allowed, and an empty list answers nothing.
    const { answers } = await readMany(transport(await issuer.token(ADMIN)), "home", Array(1000).fill("docs/a.txt"));
    expect(answers.size).toBe(1000);
    expect((await readMany(transport(await issuer.token(ADMIN)), "home", [])).answers.size).toBe(0);
  });
});
