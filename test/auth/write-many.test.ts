// ResourceService.WriteMany (docs/rest.md, "Writing many resources at once"; issue 31): each
// item written as a Write of its whole contents is, with Write's decision, checks and
// preconditions, in the request's order; an item's refusal is its own result while the others
// are written; the limits refused before anything is written. On Connect and gRPC, against a
// server that checks tokens and grants; what was stored is read back by REST.

import { createHash } from "node:crypto";
import { Code, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { BackupService } from "@trove/sdk/gen/trove/admin/v1/backup_pb.js";
import { ResourceService, type WriteManyItem } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sample, scrape } from "../support/observe.js";
import { ADMIN, type AuthServer, bearer, codeOf, DATA, type Issuer, startAuthServer, startIssuer } from "./support.js";

let issuer: Issuer;
let t: AuthServer;

beforeAll(async () => {
  issuer = await startIssuer();
  t = await startAuthServer(issuer);
  const admin = await issuer.token(ADMIN);
  for (const dir of ["docs/", "private/"]) {
    expect((await t.call("PUT", `${DATA}/home/${dir}`, admin)).status).toBe(201);
  }
  expect((await t.call("PUT", `${DATA}/home/private/p.txt`, admin, { body: "secret" })).status).toBe(201);
});
afterAll(async () => {
  await t?.stop();
  await issuer?.stop();
});

const TRANSPORTS: Record<string, (token: string | undefined) => Transport> = {
  Connect: (token) => createConnectTransport({ baseUrl: t.url, httpVersion: "2", interceptors: [bearer(token)] }),
  gRPC: (token) => createGrpcTransport({ baseUrl: t.url, interceptors: [bearer(token)] }),
};

type Conditions = Pick<Partial<WriteManyItem>, "ifMatch" | "ifNoneMatch" | "contentType" | "contentMd5">;

const item = (path: string, contents: string | Buffer, rest: Conditions = {}) => ({
  path,
  contents: typeof contents === "string" ? Buffer.from(contents) : contents,
  ...rest,
});

const md5 = (text: string) => createHash("md5").update(text).digest("base64");

/** What REST's GET answers for a path now: status, body, ETag and Content-Type. */
async function stored(path: string) {
  const res = await t.call("GET", `${DATA}/home/${path}`, await issuer.token(ADMIN));
  return {
    status: res.status,
    body: await res.text(),
    etag: res.headers.get("etag"),
    type: res.headers.get("content-type"),
  };
}

describe.each(Object.keys(TRANSPORTS))("WriteMany over %s", (name) => {
  const client = async (token: string | undefined) =>
    createClient(ResourceService, (TRANSPORTS[name] as (t: string | undefined) => Transport)(token));
  const dir = `docs/${name}`;

  it("writes every item in the request's order with Write's answers, read back by REST", async () => {
    const admin = await client(await issuer.token(ADMIN));
    expect((await t.call("PUT", `${DATA}/home/${dir}/`, await issuer.token(ADMIN))).status).toBe(201);
    const { results } = await admin.writeMany({
      store: "home",
      items: [
        item(`${dir}/a.txt`, "alpha", { contentMd5: md5("alpha") }),
        item(`${dir}/b.json`, "{}"),
        item(`${dir}/c.bin`, "gamma", { contentType: "application/x-thing" }),
        item(`${dir}/a.txt`, "alpha 2"),
        item(`${dir}/empty.txt`, ""),
      ],
    });
    expect(results.map((r) => [r.errorCode, r.write?.created])).toEqual([
      ["", true],
      ["", true],
      ["", true],
      ["", false],
      ["", true],
    ]);
    // The last write of a path wins, and the tags are the ones REST gives.
    const a = await stored(`${dir}/a.txt`);
    expect(a).toMatchObject({ status: 200, body: "alpha 2" });
    expect(a.etag).toBe(`"${results[3]?.write?.resource?.tag}"`);
    expect(results[3]?.write?.resource).toMatchObject({ size: 7n, md5: md5("alpha 2") });
    expect(await stored(`${dir}/b.json`)).toMatchObject({ body: "{}", type: "application/json" });
    expect(await stored(`${dir}/c.bin`)).toMatchObject({ body: "gamma", type: "application/x-thing" });
    expect(await stored(`${dir}/empty.txt`)).toMatchObject({ status: 200, body: "" });
  });

  it("each written item is a change: an event in the feed and a put counted in the metrics", async () => {
    const admin = await client(await issuer.token(ADMIN));
    const token = await issuer.token(ADMIN);
    const cursor = (await t.call("GET", "/resources/v2/poll", token).then((r) => r.text())).match(
      /^RESET home (\d+)$/m,
    )?.[1];
    const puts = sample(await scrape(t.url), "trove_change_events_total", { kind: "put" });
    const { results } = await admin.writeMany({
      store: "home",
      items: [
        item(`${dir}/e1.txt`, "one"),
        item(`${dir}/e2.txt`, "two", { ifMatch: ['"no-such-tag"'] }),
        item(`${dir}/e3.txt`, "three"),
      ],
    });
    expect(results.map((r) => r.errorCode)).toEqual(["", "failed_precondition", ""]);
    expect(sample(await scrape(t.url), "trove_change_events_total", { kind: "put" })).toBe(puts + 2);
    const feed = await t.call("GET", `/resources/v2/poll?store=home:${cursor}&wait=0`, token).then((r) => r.text());
    expect(feed).toContain(`idr://home/${dir}/e1.txt|modify|`);
    expect(feed).toContain(`idr://home/${dir}/e3.txt|modify|`);
    expect(feed).not.toContain("e2.txt");
  });

  it("an item's refusal is its own result with Write's code, the stored data unchanged, and the rest written", async () => {
    const admin = await client(await issuer.token(ADMIN));
    const first = await admin.writeMany({ store: "home", items: [item(`${dir}/kept.txt`, "kept")] });
    const tag = first.results[0]?.write?.resource?.tag as string;
    const { results } = await admin.writeMany({
      store: "home",
      items: [
        item(`${dir}/kept.txt`, "lost 1", { ifNoneMatch: ["*"] }),
        item(`${dir}/next1.txt`, "one"),
        item(`${dir}/kept.txt`, "lost 2", { ifMatch: ['"not-the-tag"'] }),
        item(`${dir}/kept.txt`, "lost 3", { contentMd5: md5("something else") }),
        item(`${dir}/kept.txt`, "lost 4", { contentMd5: "not base64" }),
        item("../escape.txt", "x"),
        item("", "x"),
        item(`${dir}/no-such-dir/x.txt`, "x"),
        item(dir, "a directory is there"),
        item(`${dir}/next2.txt`, "two"),
        item(`${dir}/kept.txt`, "replaced", { ifMatch: [tag] }),
      ],
    });
    expect(results.map((r) => r.errorCode)).toEqual([
      "failed_precondition",
      "",
      "failed_precondition",
      "invalid_argument",
      "invalid_argument",
      "invalid_argument",
      "invalid_argument",
      "not_found",
      "already_exists",
      "",
      "",
    ]);
    expect(results[3]?.errorMessage).toContain("content_md5 mismatch");
    expect(results[7]?.errorMessage).toBe(`parent directory /${dir}/no-such-dir/ not found`);
    expect(results[8]?.errorMessage).toBe(`a directory named /${dir}/ exists; a resource cannot take its name`);
    for (const r of results) expect(r.errorCode === "" ? r.errorMessage : r.write).toSatisfy((v) => !v);
    expect(await stored(`${dir}/kept.txt`)).toMatchObject({ body: "replaced" });
    expect(await stored(`${dir}/next1.txt`)).toMatchObject({ body: "one" });
    expect(await stored(`${dir}/next2.txt`)).toMatchObject({ body: "two" });
    expect((await stored(`${dir}/no-such-dir/x.txt`)).status).toBe(404);
    expect((await t.call("GET", `${DATA}/home/${dir}/`, await issuer.token(ADMIN))).status).toBe(200);
  });

  it("the same decision as Write: a grant on docs/ writes there and is refused elsewhere, item by item", async () => {
    const writer = await client(
      await issuer.token({ trove_grants: [{ store: "home", path: "docs", ops: ["read", "write"] }] }),
    );
    const { results } = await writer.writeMany({
      store: "home",
      items: [item("private/p.txt", "overwritten"), item(`${dir}/granted.txt`, "granted")],
    });
    expect([results[0]?.errorCode, results[0]?.errorMessage]).toEqual([
      "permission_denied",
      "alice may not write /private/p.txt in store home",
    ]);
    expect(results[1]?.write?.created).toBe(true);
    expect(await stored("private/p.txt")).toMatchObject({ body: "secret" });
    expect(await stored(`${dir}/granted.txt`)).toMatchObject({ body: "granted" });
    // A reader's token writes nothing.
    const reader = await client(await issuer.token({ trove_grants: [{ store: "home", path: "docs", ops: ["read"] }] }));
    const refused = await reader.writeMany({ store: "home", items: [item(`${dir}/granted.txt`, "no")] });
    expect(refused.results[0]?.errorCode).toBe("permission_denied");
    expect(await stored(`${dir}/granted.txt`)).toMatchObject({ body: "granted" });
  });

  it("a read-only server refuses the call as a whole (Unavailable), as it refuses a Write, and nothing is written", async () => {
    const token = await issuer.token(ADMIN);
    const admin = await client(token);
    const backup = createClient(BackupService, (TRANSPORTS[name] as (t: string | undefined) => Transport)(token));
    await backup.setReadOnly({ readOnly: true, retryAfterSeconds: 7 });
    try {
      const [code, message] = await codeOf(() =>
        admin.writeMany({ store: "home", items: [item(`${dir}/ro-1.txt`, "one"), item(`${dir}/ro-2.txt`, "two")] }),
      );
      expect(code).toBe(Code.Unavailable);
      expect(message).toMatch(/read-only/);
    } finally {
      await backup.setReadOnly({ readOnly: false });
    }
    expect((await stored(`${dir}/ro-1.txt`)).status).toBe(404);
    expect((await stored(`${dir}/ro-2.txt`)).status).toBe(404);
    expect(
      (await admin.writeMany({ store: "home", items: [item(`${dir}/ro-1.txt`, "one")] })).results[0]?.errorCode,
    ).toBe("");
  });

  it("no token: Unauthenticated, and nothing is written", async () => {
    const anonymous = await client(undefined);
    expect(
      await codeOf(() => anonymous.writeMany({ store: "home", items: [item(`${dir}/anon.txt`, "anonymous")] })),
    ).toEqual([Code.Unauthenticated, "authentication required: send Authorization: Bearer <token>"]);
    expect((await stored(`${dir}/anon.txt`)).status).toBe(404);
  });

  it("more than 1,000 items, a bad store name or a request over the message limit: refused before anything is written", async () => {
    const admin = await client(await issuer.token(ADMIN));
    const many = Array.from({ length: 1001 }, (_, i) => item(`${dir}/many-${i}.txt`, "x"));
    expect(await codeOf(() => admin.writeMany({ store: "home", items: many }))).toEqual([
      Code.InvalidArgument,
      "a WriteMany holds at most 1000 items, not 1001",
    ]);
    expect((await stored(`${dir}/many-0.txt`)).status).toBe(404);
    expect((await codeOf(() => admin.writeMany({ store: "no such/store", items: [item("a.txt", "x")] })))[0]).toBe(
      Code.InvalidArgument,
    );
    // The request is one message: above 4 MiB and 64 KiB it is refused before it is read whole.
    const big = [
      item(`${dir}/big-1.bin`, Buffer.alloc(3 * 1024 * 1024)),
      item(`${dir}/big-2.bin`, Buffer.alloc(2 * 1024 * 1024)),
    ];
    expect((await codeOf(() => admin.writeMany({ store: "home", items: big })))[0]).toBe(Code.ResourceExhausted);
    expect((await stored(`${dir}/big-1.bin`)).status).toBe(404);
    // Exactly 1,000 items are written, and an empty list answers nothing.
    const thousand = await admin.writeMany({ store: "home", items: many.slice(0, 1000) });
    expect(thousand.results.filter((r) => r.write?.created).length).toBe(1000);
    expect((await stored(`${dir}/many-999.txt`)).body).toBe("x");
    expect((await admin.writeMany({ store: "home", items: [] })).results).toEqual([]);
  });
});
