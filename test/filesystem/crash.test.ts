// Issue 17, item 4: an upload is assembled in filesystem-temp and renamed into place only when it
// is whole, so a Trove killed (SIGKILL) in the middle of one leaves no partial file in the folder;
// the next start empties filesystem-temp and still serves what was there.

import { readdir } from "node:fs/promises";
import { request } from "node:http";
import { join } from "node:path";
import { afterEach, beforeEach, expect, test, vi } from "vitest";
import { bytes, DATA } from "../rest/rest-client.js";
import { cleanUp, createFolderStore, serverChildren, stopChild, tempDir, treeOf, until } from "./support.js";

vi.setConfig({ testTimeout: 90_000 });

let dataDir: string;
let folder: string;
const children = serverChildren(() => dataDir);
const startChild = () => children.start();

beforeEach(async () => {
  dataDir = await tempDir("data");
  folder = await tempDir("folder");
});

afterEach(async () => {
  await children.stopAll();
  await cleanUp(dataDir, folder);
});

test("SIGKILL of Trove during an upload leaves no partial file in the folder; a restart serves what was there (issue 17, item 4)", async () => {
  const first = await startChild();
  expect((await createFolderStore(first.client, "team", folder)).status).toBe(201);
  expect((await first.client.fetch("PUT", `${DATA}/team/kept.txt`, { body: bytes("kept") })).status).toBe(201);
  const temp = join(dataDir, "tmp", "filesystem", "team");

  // An upload of 64 MiB announced, of which 1 MiB is sent before the server is killed.
  const upload = request({
    host: "127.0.0.1",
    port: first.port,
    method: "PUT",
    path: `${DATA}/team/big.bin`,
    headers: { "Content-Length": String(64 * 1024 * 1024) },
  });
  upload.on("error", () => {});
  upload.write(Buffer.alloc(1024 * 1024, 7));
  await until(async () => (await readdir(temp)).length > 0, "the upload to be assembled in filesystem-temp");
  first.child.kill("SIGKILL");
  await new Promise((resolve) => first.child.once("exit", resolve));
  upload.destroy();

  expect([...(await treeOf(folder)).keys()]).toEqual(["kept.txt"]);

  const second = await startChild();
  expect((await second.client.fetch("GET", `${DATA}/team/big.bin`)).status).toBe(404);
  const kept = await second.client.fetch("GET", `${DATA}/team/kept.txt`);
  expect(kept.status).toBe(200);
  expect(kept.text).toBe("kept");
  await until(async () => (await readdir(temp)).length === 0, "filesystem-temp to be emptied at start-up");
  expect([...(await treeOf(folder)).keys()]).toEqual(["kept.txt"]);
  await stopChild(second.child);
});
