// Issue 17: a filesystem store through the RPC faces: WatchChanges delivers the event of a file
// written by another program, Read serves its bytes, Write lands as a plain file and a stale
// if_match after an external edit is FAILED_PRECONDITION; a folder that went missing is
// UNAVAILABLE (503 on REST), never read as "everything was deleted".

import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { bytes, DATA } from "../rest/rest-client.js";
import {
  cleanUp,
  createFolderStore,
  type FolderServer,
  getFile,
  latestEvent,
  startFolderServer,
  tempDir,
  until,
} from "./support.js";

vi.setConfig({ testTimeout: 60_000 });

let dataDir: string;
let folder: string;
let trove: FolderServer;

beforeEach(async () => {
  dataDir = await tempDir("data");
  folder = await tempDir("folder");
  trove = await startFolderServer(dataDir);
  expect((await createFolderStore(trove.client, "team", folder)).status).toBe(201);
});

afterEach(async () => {
  await trove.close();
  await cleanUp(dataDir, folder, `${folder}-moved`);
});

async function* oneWrite(path: string, contents: string, ifMatch: string[] = []) {
  yield { part: { case: "header" as const, value: { store: "team", path, ifMatch } } };
  yield { part: { case: "chunk" as const, value: bytes(contents) } };
}

describe("a filesystem store through gRPC (issue 17)", () => {
  test("WatchChanges delivers the change of a file written by another program; Read serves its bytes", async () => {
    const transport = createGrpcTransport({ baseUrl: trove.url });
    const changes = createClient(ChangeService, transport);
    const resources = createClient(ResourceService, transport);
    const after = await latestEvent(trove.client, "team");
    const abort = new AbortController();
    const stream = changes.watchChanges(
      { cursors: [{ store: "team", eventId: BigInt(after) }] },
      { signal: abort.signal },
    );
    await writeFile(join(folder, "watched.json"), '{"a":1}');
    let tag = "";
    try {
      for await (const message of stream) {
        const change = message.events
          .map((e) => (e.kind.case === "change" ? e.kind.value : undefined))
          .find((c) => c?.path === "watched.json");
        if (change) {
          expect(change.operation).toBe(1); // MODIFY
          tag = change.tag;
          break;
        }
      }
    } finally {
      abort.abort();
    }
    let text = "";
    for await (const part of resources.read({ store: "team", path: "watched.json" })) {
      if (part.resource) expect(part.resource.tag).toBe(tag);
      text += Buffer.from(part.chunk).toString();
    }
    expect(text).toBe('{"a":1}');
  });

  test("Write lands as a plain file; a stale if_match after an external edit is FAILED_PRECONDITION", async () => {
    const resources = createClient(ResourceService, createGrpcTransport({ baseUrl: trove.url }));
    const written = await resources.write(oneWrite("r.txt", "by rpc"));
    expect(await readFile(join(folder, "r.txt"), "utf8")).toBe("by rpc");
    await writeFile(join(folder, "r.txt"), "by another program");
    const err = await resources.write(oneWrite("r.txt", "again", [written.resource?.tag ?? ""])).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.FailedPrecondition);
    expect(await readFile(join(folder, "r.txt"), "utf8")).toBe("by another program");
  });

  test("WriteMany (issue 31) lands each item as a plain file, one at a time; a stale if_match is that item's failed_precondition", async () => {
    const resources = createClient(ResourceService, createGrpcTransport({ baseUrl: trove.url }));
    const first = await resources.write(oneWrite("m.txt", "by rpc"));
    await writeFile(join(folder, "m.txt"), "by another program");
    const { results } = await resources.writeMany({
      store: "team",
      items: [
        { path: "a.txt", contents: bytes("alpha") },
        { path: "m.txt", contents: bytes("lost"), ifMatch: [first.resource?.tag ?? ""] },
        { path: "b.json", contents: bytes("{}") },
      ],
    });
    expect(results.map((r) => [r.errorCode, r.write?.created])).toEqual([
      ["", true],
      ["failed_precondition", undefined],
      ["", true],
    ]);
    expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("alpha");
    expect(await readFile(join(folder, "b.json"), "utf8")).toBe("{}");
    expect(await readFile(join(folder, "m.txt"), "utf8")).toBe("by another program");
    expect(`"${results[0]?.write?.resource?.tag}"`).toBe((await getFile(trove.client, "team", "a.txt")).etag);
  });
});

describe("a folder that went missing (issue 17)", () => {
  test("reads and writes answer 503 with the reason; nothing is deleted; served again once it is back", async () => {
    expect((await trove.client.fetch("PUT", `${DATA}/team/keep.txt`, { body: bytes("keep") })).status).toBe(201);
    const before = await latestEvent(trove.client, "team");
    await rename(folder, `${folder}-moved`);
    const read = await trove.client.fetch("GET", `${DATA}/team/keep.txt`);
    expect(read.status).toBe(503);
    expect(read.text).toMatch(/^the folder of filesystem store team \(.*\) is missing or not a directory\n$/);
    const write = await trove.client.fetch("PUT", `${DATA}/team/new.txt`, { body: bytes("x") });
    expect(write.status).toBe(503);
    expect(await latestEvent(trove.client, "team")).toBe(before);
    await rename(`${folder}-moved`, folder);
    await until(async () => (await getFile(trove.client, "team", "keep.txt")).status === 200, "keep.txt again");
    expect(await latestEvent(trove.client, "team")).toBe(before);
  });
});
