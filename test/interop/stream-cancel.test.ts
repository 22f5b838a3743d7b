// Read and List stop between messages once their call's deadline has run out or the client has
// cancelled: the stream ends with DEADLINE_EXCEEDED or CANCELLED instead of sending the rest of a
// resource or a listing to nobody (issue 12, item 6). Driven through the core with a handler
// context, as the server drives it, so that what the server would send next is observable.

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createHandlerContext } from "@connectrpc/connect";
import {
  ListRequestSchema,
  ReadRequestSchema,
  ResourceService,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anonymousCaller, callerKey } from "../../src/auth/caller.js";
import { ResourceCore } from "../../src/services/resource-service.js";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer;
const BIG = 4 * 1024 * 1024;

beforeAll(async () => {
  t = await startServer();
  // Larger than one read chunk (1 MiB, src/storage/local/blob-files.ts), so Read sends several messages; a directory of three.
  for (const [path, body] of [
    ["cancel/", ""],
    ["cancel/dir/", ""],
    ["cancel/big.bin", Buffer.alloc(BIG, 0x61)],
    ["cancel/dir/a.txt", "a"],
    ["cancel/dir/b.txt", "b"],
    ["cancel/dir/c.txt", "c"],
  ] as const) {
    const res = await fetch(`${t.url}/resources/v2/data/home/${path}`, { method: "PUT", body });
    expect(res.status).toBe(201);
  }
});
afterAll(() => t?.stop());

const core = () => new ResourceCore({ storage: t.storage, maxResourceSize: 1024 ** 3 });

function context(method: "read" | "list", options: { signal?: AbortSignal; timeoutMs?: number }) {
  const ctx = createHandlerContext({
    service: ResourceService,
    method: ResourceService.method[method],
    protocolName: "test",
    requestMethod: "POST",
    url: "/",
    requestSignal: options.signal ?? new AbortController().signal,
    timeoutMs: options.timeoutMs,
  });
  ctx.values.set(callerKey, anonymousCaller);
  return ctx;
}

/** Reads a stream, calling `after(n)` after the n-th message; the messages read and how it ended. */
async function consume(
  stream: AsyncIterable<unknown>,
  after: (n: number) => Promise<void> | void,
): Promise<{ messages: number; code: Code | "OK" }> {
  let messages = 0;
  try {
    for await (const _ of stream) await after(++messages);
    return { messages, code: "OK" };
  } catch (err) {
    return { messages, code: ConnectError.from(err).code };
  }
}

const read = create(ReadRequestSchema, { store: "home", path: "cancel/big.bin" });
const list = create(ListRequestSchema, { store: "home", path: "cancel/dir" });

describe("Read and List end between messages", () => {
  it("not cut: Read sends the whole resource in several messages, List the directory and its entries", async () => {
    expect(await consume(core().read(read, context("read", {})), () => {})).toEqual({
      messages: BIG / (1024 * 1024),
      code: "OK",
    });
    expect(await consume(core().list(list, context("list", {})), () => {})).toEqual({ messages: 2, code: "OK" });
  });

  it("a Read the client cancels after its first message ends with CANCELLED and sends no more", async () => {
    const abort = new AbortController();
    const outcome = await consume(core().read(read, context("read", { signal: abort.signal })), () => abort.abort());
    expect(outcome).toEqual({ messages: 1, code: Code.Canceled });
  });

  it("a List the client cancels after the directory ends with CANCELLED before its entries", async () => {
    const abort = new AbortController();
    const outcome = await consume(core().list(list, context("list", { signal: abort.signal })), () => abort.abort());
    expect(outcome).toEqual({ messages: 1, code: Code.Canceled });
  });

  it("a Read and a List whose deadline runs out while the client reads slowly end with DEADLINE_EXCEEDED", async () => {
    // A 50 ms deadline; the client takes its time over the first message until the deadline has passed.
    const slowReader = (ctx: { signal: AbortSignal }) => () =>
      ctx.signal.aborted ? undefined : new Promise<void>((r) => ctx.signal.addEventListener("abort", () => r()));
    const readCtx = context("read", { timeoutMs: 50 });
    expect(await consume(core().read(read, readCtx), slowReader(readCtx))).toEqual({
      messages: 1,
      code: Code.DeadlineExceeded,
    });
    const listCtx = context("list", { timeoutMs: 50 });
    expect(await consume(core().list(list, listCtx), slowReader(listCtx))).toEqual({
      messages: 1,
      code: Code.DeadlineExceeded,
    });
  });
});
