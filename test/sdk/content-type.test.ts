// The SDK's REST client leaves the type to the server: a put without contentType sends no
// Content-Type (a string body included, which fetch would label text/plain;charset=UTF-8), so
// the server types the resource from its extension; a type the caller gives is kept.

import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRestClient, type TroveRestClient } from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";

describe("REST client content types", () => {
  let server: TestServer;
  let rest: TroveRestClient;

  beforeAll(async () => {
    server = await startServer();
    rest = createRestClient({ baseUrl: server.url });
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** The type the server answers with on GET, and the one its listing shows. */
  async function storedType(path: string): Promise<{ get: string; listed: string | undefined }> {
    const got = await rest.get("home", path);
    if (got.notModified) throw new Error("not modified");
    const listing = await rest.list("home", "");
    return { get: got.type, listed: listing.entries.find((e) => e.name === path)?.type };
  }

  it("a string put of x.yaml reads back with the server's YAML type, not text/plain", async () => {
    await rest.put("home", "x.yaml", "name: trove\n");
    expect(await storedType("x.yaml")).toEqual({ get: "application/yaml", listed: "application/yaml" });
    const got = await rest.get("home", "x.yaml", { as: "text" });
    expect(got.notModified ? undefined : got.body).toBe("name: trove\n");
  });

  it("every kind of body without contentType is typed from the extension", async () => {
    const docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
    const bodies: Array<[string, Parameters<TroveRestClient["put"]>[2], string]> = [
      ["conf.yml", "a: 1\n", "application/yaml"],
      ["logo.ico", new Uint8Array([0, 0, 1, 0]), "image/vnd.microsoft.icon"],
      ["doc.docx", Buffer.from("PK"), docx],
      ["blob.json", new Blob(["{}"]), "application/json"],
      ["stream.csv", Readable.from([Buffer.from("a,b\n")]), "text/csv"],
      ["web.svg", new Blob(["<svg/>"]).stream(), "image/svg+xml"],
      ["notes", "no extension", "application/octet-stream"],
    ];
    for (const [path, body, type] of bodies) {
      await rest.put("home", path, body);
      expect([path, await storedType(path)]).toEqual([path, { get: type, listed: type }]);
    }
  });

  it("a type the caller gives is kept: contentType, or a Blob's own type", async () => {
    await rest.put("home", "given.yaml", "a: 1\n", { contentType: "text/x-yaml; charset=utf-8" });
    expect((await storedType("given.yaml")).get).toBe("text/x-yaml; charset=utf-8");
    await rest.put("home", "typed.bin", new Blob(["{}"], { type: "application/json" }));
    expect((await storedType("typed.bin")).get).toBe("application/json");
    await rest.put("home", "both.bin", new Blob(["{}"], { type: "application/json" }), { contentType: "text/plain" });
    expect((await storedType("both.bin")).get).toBe("text/plain");
  });
});
