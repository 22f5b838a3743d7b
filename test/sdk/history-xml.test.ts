// The SDK's side of history (docs/history.md) without a server: the `versions` and `restore`
// documents as the server writes them (src/rest/xml.ts) parsed back, moments checked as the
// server checks them, the requests the REST client sends, and 410 / HISTORY_PURGED as
// HistoryPurgedError on both faces.

import { create } from "@bufbuild/protobuf";
import { ResourceSchema, RestoreChangeSchema, VersionSchema } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { describe, expect, it } from "vitest";
import type { Context } from "../../sdk/src/cli/command.js";
import { UsageError } from "../../sdk/src/cli/config.js";
import { asOfOption, logLines, restoreSummary } from "../../sdk/src/cli/history-commands.js";
import {
  BadRequestError,
  createRestClient,
  DeletedError,
  formatMoment,
  fromConnectError,
  HistoryPurgedError,
  isHistoryPurgedError,
  NotFoundError,
  PreconditionFailedError,
  parseRestore,
  parseVersions,
} from "../../sdk/src/index.js";
import {
  HistoryPurgedError as ServerHistoryPurgedError,
  PreconditionFailedError as ServerPreconditionFailed,
} from "../../src/domain/errors.js";
import { parseMoment } from "../../src/domain/history.js";
import { restoreDocument, versionElement, versionsStart } from "../../src/rest/xml.js";
import { toConnectError } from "../../src/rpc/connect-errors.js";

function version(fields: {
  tag: string;
  size: number;
  md5: string;
  type: string;
  millis: number;
  eventId: number;
  operation: string;
  user: string;
  current?: boolean;
  blob?: string;
}) {
  return create(VersionSchema, {
    resource: create(ResourceSchema, {
      tag: fields.tag,
      size: BigInt(fields.size),
      md5: fields.md5,
      type: fields.type,
      lastModifiedMillis: BigInt(fields.millis),
      eventId: BigInt(fields.eventId),
      blob: fields.blob ?? "",
    }),
    operation: fields.operation,
    user: fields.user,
    current: fields.current ?? false,
  });
}

describe("the versions document", () => {
  const states = [
    version({
      tag: "t3",
      size: 0,
      md5: "",
      type: "",
      millis: Date.UTC(2026, 10, 27, 15, 2),
      eventId: 9,
      operation: "delete",
      user: "client-1",
      current: true,
      blob: "",
    }),
    version({
      tag: "t2",
      size: 5,
      md5: "XUFAKrxLKna5cZ2REBfFkg==",
      type: "text/plain",
      millis: Date.UTC(2026, 10, 27, 15, 1, 0, 250),
      eventId: 7,
      operation: "modify",
      user: 'a "quoted" <user> & co',
      blob: "0b6e2c9a-3c9e-4b1e-9f7e-2f5d1b7c8a11",
    }),
    version({
      tag: "t1",
      size: 3,
      md5: "rL0Y20zC+Fzt72VPzMSk2A==",
      type: "application/json; charset=utf-8",
      millis: Date.UTC(2026, 10, 27, 15, 0),
      eventId: 4,
      operation: "modify",
      user: "",
      blob: "0b6e2c9a-0000-4b1e-9f7e-2f5d1b7c8a11",
    }),
  ];

  it("parses as the server writes it: every field, newest first, the blob only when asked for", () => {
    const xml = `${versionsStart("home", "docs/a.txt")}${states.map((v) => versionElement(v, false)).join("")}</versions>\n`;
    expect(parseVersions(xml)).toEqual([
      {
        tag: "t3",
        size: 0,
        md5: "",
        type: "",
        lastModified: new Date("2026-11-27T15:02:00.000Z"),
        event: 9,
        operation: "delete",
        user: "client-1",
        current: true,
      },
      {
        tag: "t2",
        size: 5,
        md5: "XUFAKrxLKna5cZ2REBfFkg==",
        type: "text/plain",
        lastModified: new Date("2026-11-27T15:01:00.250Z"),
        event: 7,
        operation: "modify",
        user: 'a "quoted" <user> & co',
        current: false,
      },
      {
        tag: "t1",
        size: 3,
        md5: "rL0Y20zC+Fzt72VPzMSk2A==",
        type: "application/json; charset=utf-8",
        lastModified: new Date("2026-11-27T15:00:00.000Z"),
        event: 4,
        operation: "modify",
        user: "",
        current: false,
      },
    ]);
    const withBlobs = `${versionsStart("home", "docs/a.txt")}${states.map((v) => versionElement(v, true)).join("")}</versions>\n`;
    expect(parseVersions(withBlobs).map((v) => v.blob)).toEqual([
      undefined,
      "0b6e2c9a-3c9e-4b1e-9f7e-2f5d1b7c8a11",
      "0b6e2c9a-0000-4b1e-9f7e-2f5d1b7c8a11",
    ]);
  });

  it("one version is a list of one; another document is refused", () => {
    const first = states[0] ?? version({} as never);
    const xml = `${versionsStart("home", "a")}${versionElement(first, false)}</versions>\n`;
    expect(parseVersions(xml)).toHaveLength(1);
    expect(() => parseVersions('<?xml version="1.0"?>\n<resources></resources>')).toThrow(
      "not a versions document: no versions element",
    );
  });

  it("trove log prints one line per version: tag, time, user, size, operation, event, (current)", () => {
    const xml = `${versionsStart("home", "docs/a.txt")}${states.map((v) => versionElement(v, false)).join("")}</versions>\n`;
    expect(logLines(parseVersions(xml))).toEqual([
      "t3  2026-11-27T15:02:00.000Z  client-1                0  delete  event 9  (current)",
      't2  2026-11-27T15:01:00.250Z  a "quoted" <user> & co  5  modify  event 7',
      "t1  2026-11-27T15:00:00.000Z  -                       3  modify  event 4",
    ]);
  });
});

describe("the restore document", () => {
  const changes = [
    create(RestoreChangeSchema, { path: "site/new", operation: "delete", directory: true }),
    create(RestoreChangeSchema, { path: "site/css", operation: "create", directory: true }),
    create(RestoreChangeSchema, { path: "site/css/a & b.css", operation: "create", directory: false }),
    create(RestoreChangeSchema, { path: "site/index.html", operation: "modify", directory: false }),
  ];

  it("parses as the server writes it: store, path, the event of the moment, dry run, each change in order", () => {
    expect(parseRestore(restoreDocument("home", "site", 12n, true, changes))).toEqual({
      store: "home",
      path: "site",
      asOf: 12,
      dryRun: true,
      changes: [
        { path: "site/new", operation: "delete", directory: true },
        { path: "site/css", operation: "create", directory: true },
        { path: "site/css/a & b.css", operation: "create", directory: false },
        { path: "site/index.html", operation: "modify", directory: false },
      ],
    });
  });

  it("a restore with no change, and one change, of the store's root", () => {
    expect(parseRestore(restoreDocument("home", "", 3n, false, []))).toEqual({
      store: "home",
      path: "",
      asOf: 3,
      dryRun: false,
      changes: [],
    });
    expect(parseRestore(restoreDocument("home", "", 3n, false, changes.slice(3))).changes).toEqual([
      { path: "site/index.html", operation: "modify", directory: false },
    ]);
  });

  it("an unknown operation or another document is refused", () => {
    expect(() =>
      parseRestore(
        '<restore store="home" path="" as-of="1" dry-run="false" changes="1"><change path="a" operation="rename" directory="false"/></restore>',
      ),
    ).toThrow('a restore change with operation "rename"');
    expect(() => parseRestore("<versions/>")).toThrow("not a restore document: no restore element");
  });

  it("trove restore's summary counts each operation; a dry run says nothing changed", () => {
    const r = parseRestore(restoreDocument("home", "site", 12n, false, changes));
    expect(restoreSummary(r)).toBe("trove restore: home/site/ as of event 12: 2 created, 1 modified, 1 deleted");
    expect(restoreSummary({ ...r, path: "", dryRun: true })).toBe(
      "trove restore: dry run: home/ as of event 12: 2 to create, 1 to modify, 1 to delete; nothing changed",
    );
  });
});

describe("moments", () => {
  it("an event id or an ISO 8601 date-time with a zone, as the server takes them; a Date as its ISO text", () => {
    for (const text of ["0", "42", "2026-11-27T15:00:00Z", "2026-11-27T15:00:00.123+01:00", "2026-11-27T15:00Z"]) {
      expect(formatMoment(text), text).toBe(text);
      expect(() => parseMoment(text), text).not.toThrow();
    }
    expect(formatMoment(42)).toBe("42");
    expect(formatMoment(new Date(Date.UTC(2026, 10, 27, 15)))).toBe("2026-11-27T15:00:00.000Z");
  });

  it("a moment the server would refuse is a RangeError with the server's reason", () => {
    for (const text of ["", "-1", "1.5", "yesterday", "2026-11-27", "2026-11-27T15:00:00", "2026-13-40T99:00:00Z"]) {
      expect(() => formatMoment(text), text).toThrow(RangeError);
      expect(() => parseMoment(text), text).toThrow();
    }
    expect(() => formatMoment("2026-11-27T15:00:00")).toThrow(
      'as-of "2026-11-27T15:00:00" is neither an event id (a whole number) nor an ISO 8601 date-time with a time zone (e.g. 2026-11-27T15:00:00Z)',
    );
    expect(() => formatMoment(-1)).toThrow("as-of -1 is not an event id: give a whole number, 0 or more");
    expect(() => formatMoment(1.5)).toThrow(RangeError);
    expect(() => formatMoment(new Date(Number.NaN))).toThrow("as-of is an invalid Date");
  });

  it("trove's --as-of: a malformed moment is a usage error with the reason", () => {
    const ctx = (value: string | undefined) => ({ values: { "as-of": value } }) as unknown as Context;
    expect(asOfOption(ctx(undefined))).toBeUndefined();
    expect(asOfOption(ctx("17"))).toBe("17");
    expect(() => asOfOption(ctx("last tuesday"))).toThrow(
      new UsageError(
        '--as-of "last tuesday" is neither an event id (a whole number) nor an ISO 8601 date-time with a time zone (e.g. 2026-11-27T15:00:00Z)',
      ),
    );
  });
});

/** A fetch that answers `answer` and records each request. */
function recording(answer: () => Response) {
  const requests: Array<{ method: string; url: string; headers: Headers; body: unknown }> = [];
  const fetchFn = (async (input: string | URL | Request, init?: RequestInit) => {
    requests.push({
      method: init?.method ?? "GET",
      url: String(input),
      headers: new Headers(init?.headers),
      body: init?.body,
    });
    return answer();
  }) as typeof fetch;
  return { requests, client: createRestClient({ baseUrl: "http://trove.test", fetch: fetchFn }) };
}

const xmlAnswer = (body: string) => () =>
  new Response(body, { status: 200, headers: { "Content-Type": "application/xml" } });

describe("the REST client's history requests", () => {
  it("listVersions: GET ?versions=true (and include-blob-uuid), paths percent-encoded", async () => {
    const { requests, client } = recording(xmlAnswer('<versions store="home" path="a b.txt"></versions>'));
    expect(await client.listVersions("home", "docs/a b.txt")).toEqual([]);
    await client.listVersions("home", "docs/a b.txt", { includeBlobUuid: true });
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      "GET http://trove.test/resources/v2/data/home/docs/a%20b.txt?versions=true",
      "GET http://trove.test/resources/v2/data/home/docs/a%20b.txt?versions=true&include-blob-uuid=true",
    ]);
  });

  it("get with asOf, getVersion, list with asOf: GET ?as-of= / ?version=, the moment as given", async () => {
    const { requests, client } = recording(
      () => new Response("old", { status: 200, headers: { ETag: '"t1"', "Content-Type": "text/plain" } }),
    );
    expect(await client.get("home", "a.txt", { asOf: 7, as: "text" })).toMatchObject({ body: "old", tag: "t1" });
    await client.get("home", "a.txt", { asOf: new Date(Date.UTC(2026, 10, 27, 15)) });
    await client.get("home", "a.txt", { asOf: "2026-11-27T16:00:00+01:00", overrideMime: "text/html" });
    expect(await client.getVersion("home", "a.txt", "t1", { as: "text", ifNoneMatch: "t0" })).toMatchObject({
      body: "old",
    });
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      "GET http://trove.test/resources/v2/data/home/a.txt?as-of=7",
      "GET http://trove.test/resources/v2/data/home/a.txt?as-of=2026-11-27T15%3A00%3A00.000Z",
      "GET http://trove.test/resources/v2/data/home/a.txt?as-of=2026-11-27T16%3A00%3A00%2B01%3A00&override-mime=text%2Fhtml",
      "GET http://trove.test/resources/v2/data/home/a.txt?version=t1",
    ]);
    expect(requests[3]?.headers.get("if-none-match")).toBe('"t0"');

    const listing = recording(xmlAnswer("<resources></resources>"));
    await listing.client.list("home", "site", { asOf: 3, recursive: true });
    expect(listing.requests.map((r) => r.url)).toEqual([
      "http://trove.test/resources/v2/data/home/site/?recursive=true&as-of=3",
    ]);
  });

  it("a malformed moment or an empty tag is refused before any request", async () => {
    const { requests, client } = recording(xmlAnswer("<resources></resources>"));
    await expect(client.get("home", "a.txt", { asOf: "soon" })).rejects.toThrow(RangeError);
    await expect(client.list("home", "", { asOf: -3 })).rejects.toThrow(RangeError);
    await expect(client.getVersion("home", "a.txt", "")).rejects.toThrow("getVersion needs a tag");
    await expect(client.restore("home", "a.txt", { version: "" })).rejects.toThrow("restore needs the version's tag");
    await expect(client.restoreAsOf("home", "site", { asOf: "2026-11-27" })).rejects.toThrow(
      /^restore-as-of "2026-11-27" is neither an event id/,
    );
    expect(requests).toEqual([]);
  });

  it("restore: PUT ?restore= with no body and If-Match; created on 201, the new tag", async () => {
    let status = 201;
    const { requests, client } = recording(
      () => new Response(null, { status, headers: { ETag: '"t9"', "Content-MD5": "md5" } }),
    );
    expect(await client.restore("home", "docs/a.txt", { version: "t1" })).toMatchObject({
      created: true,
      tag: "t9",
      md5: "md5",
    });
    status = 200;
    expect(await client.restore("home", "docs/a.txt", { version: "t1", ifMatch: "t8" })).toMatchObject({
      created: false,
    });
    expect(requests.map((r) => `${r.method} ${r.url} ${r.body ?? "no body"}`)).toEqual([
      "PUT http://trove.test/resources/v2/data/home/docs/a.txt?restore=t1 no body",
      "PUT http://trove.test/resources/v2/data/home/docs/a.txt?restore=t1 no body",
    ]);
    expect(requests[1]?.headers.get("if-match")).toBe('"t8"');
  });

  it("restoreAsOf: PUT {dir}/?restore-as-of=[&dry-run=true], the root as the store's /", async () => {
    const { requests, client } = recording(
      xmlAnswer(
        '<restore store="home" path="site" as-of="5" dry-run="true" changes="1"><change path="site/a" operation="create" directory="false"/></restore>',
      ),
    );
    expect(await client.restoreAsOf("home", "site", { asOf: 5, dryRun: true })).toEqual({
      store: "home",
      path: "site",
      asOf: 5,
      dryRun: true,
      changes: [{ path: "site/a", operation: "create", directory: false }],
    });
    await client.restoreAsOf("home", "", { asOf: "2026-11-27T15:00:00Z" });
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      "PUT http://trove.test/resources/v2/data/home/site/?restore-as-of=5&dry-run=true",
      "PUT http://trove.test/resources/v2/data/home/?restore-as-of=2026-11-27T15%3A00%3A00Z",
    ]);
  });

  it("410 Gone is a HistoryPurgedError with the server's reason; 404 and 400 as for every call", async () => {
    const reason = "store home keeps its history from event 40 on (keep-versions 1d): event 3 is older";
    let answer = new Response(reason, { status: 410, statusText: "Gone", headers: { "Content-Type": "text/plain" } });
    const { client } = recording(() => answer);
    const gone = await client.list("home", "", { asOf: 3 }).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(HistoryPurgedError);
    expect(isHistoryPurgedError(gone)).toBe(true);
    expect(gone).toMatchObject({ name: "HistoryPurgedError", status: 410, reason });
    answer = new Response("/a.txt in store home has no version t0", { status: 404 });
    await expect(client.getVersion("home", "a.txt", "t0")).rejects.toBeInstanceOf(NotFoundError);
    answer = new Response("deleted", { status: 404, headers: { ETag: '"t5"' } });
    await expect(client.get("home", "a.txt", { asOf: 5 })).rejects.toMatchObject({ name: "DeletedError", tag: "t5" });
    await expect(client.get("home", "a.txt", { asOf: 5 })).rejects.toBeInstanceOf(DeletedError);
    answer = new Response("/site/ is a directory: versions are kept of resources; list it with as-of", {
      status: 400,
    });
    await expect(client.listVersions("home", "site")).rejects.toBeInstanceOf(BadRequestError);
  });
});

describe("HISTORY_PURGED on the gRPC and Connect faces", () => {
  it("fromConnectError turns the server's FAILED_PRECONDITION with HISTORY_PURGED into HistoryPurgedError (410)", () => {
    const reason =
      "store home keeps no history (keep-versions 0): only its current state, event 8, can be read, not event 2";
    const err = fromConnectError(toConnectError(new ServerHistoryPurgedError(reason), { store: "home", path: "site" }));
    expect(err).toBeInstanceOf(HistoryPurgedError);
    expect(err).toMatchObject({ status: 410, reason });
    // A failed If-Match is still a PreconditionFailedError.
    const stale = fromConnectError(
      toConnectError(new ServerPreconditionFailed('If-Match does not match the current ETag "t2"'), {
        store: "home",
        path: "a.txt",
      }),
    );
    expect(stale).toBeInstanceOf(PreconditionFailedError);
    expect(isHistoryPurgedError(stale)).toBe(false);
  });
});
