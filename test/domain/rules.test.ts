// What a write may do, given what is stored: the outcomes of the pure write rules.

import { describe, expect, it } from "vitest";
import {
  AlreadyExistsError,
  DeletedError,
  ForbiddenError,
  NotFoundError,
  PreconditionFailedError,
} from "../../src/domain/errors.js";
import {
  isExpiredTombstone,
  type NodeState,
  planCreateStore,
  planDelete,
  planMakeDirectory,
  planPutFile,
} from "../../src/domain/rules.js";

const root: NodeState = { path: "", directory: true, deleted: false, tag: "root" };
const dir = (path: string, tag = `dir-${path}`): NodeState => ({ path, directory: true, deleted: false, tag });
const file = (path: string, tag = `file-${path}`): NodeState => ({ path, directory: false, deleted: false, tag });
const tombstone = (node: NodeState): NodeState => ({ ...node, deleted: true, tag: `gone-${node.path}` });

describe("planPutFile", () => {
  it("creates a resource where there is none, or only a tombstone", () => {
    expect(planPutFile("a.txt", undefined, root, {})).toEqual({ created: true });
    expect(planPutFile("d/a.txt", tombstone(file("d/a.txt")), dir("d"), {})).toEqual({ created: true });
    expect(planPutFile("d/x", tombstone(dir("d/x")), dir("d"), {})).toEqual({ created: true });
  });

  it("replaces an existing resource", () => {
    expect(planPutFile("a.txt", file("a.txt"), root, {})).toEqual({ created: false });
  });

  it("refuses the root with ForbiddenError", () => {
    expect(() => planPutFile("", root, undefined, {})).toThrow(ForbiddenError);
  });

  it("refuses the name of a live directory with ForbiddenError", () => {
    expect(() => planPutFile("d", dir("d"), root, {})).toThrow(ForbiddenError);
    expect(() => planPutFile("d", dir("d"), root, {})).toThrow(/a directory named \/d\/ exists/);
  });

  it("throws NotFoundError when the parent is missing, deleted, or a resource", () => {
    expect(() => planPutFile("d/a.txt", undefined, undefined, {})).toThrow(NotFoundError);
    expect(() => planPutFile("d/a.txt", undefined, undefined, {})).toThrow("parent directory /d/ not found");
    expect(() => planPutFile("d/a.txt", undefined, tombstone(dir("d")), {})).toThrow(NotFoundError);
    expect(() => planPutFile("f/a.txt", undefined, file("f"), {})).toThrow(NotFoundError);
  });

  it("checks the parent before If-Match", () => {
    expect(() => planPutFile("d/a.txt", undefined, undefined, { ifMatch: ["*"] })).toThrow(NotFoundError);
  });

  it("If-Match passes on the current tag, one of several, or *", () => {
    const target = file("a.txt", "t1");
    expect(planPutFile("a.txt", target, root, { ifMatch: ["t1"] })).toEqual({ created: false });
    expect(planPutFile("a.txt", target, root, { ifMatch: ["t0", "t1"] })).toEqual({ created: false });
    expect(planPutFile("a.txt", target, root, { ifMatch: ["*"] })).toEqual({ created: false });
  });

  it("If-Match fails with PreconditionFailedError on another tag, an absent resource, or a tombstone", () => {
    expect(() => planPutFile("a.txt", file("a.txt", "t1"), root, { ifMatch: ["t2"] })).toThrow(PreconditionFailedError);
    expect(() => planPutFile("a.txt", file("a.txt", "t1"), root, { ifMatch: ["t2"] })).toThrow(/current ETag "t1"/);
    expect(() => planPutFile("a.txt", undefined, root, { ifMatch: ["*"] })).toThrow(PreconditionFailedError);
    const gone = tombstone(file("a.txt"));
    expect(() => planPutFile("a.txt", gone, root, { ifMatch: [gone.tag] })).toThrow(PreconditionFailedError);
    expect(() => planPutFile("a.txt", gone, root, { ifMatch: ["*"] })).toThrow(/does not exist/);
  });
});

describe("If-None-Match on a write (issue 30: RFC 9110's conditional create)", () => {
  it("If-None-Match * creates where nothing lives: no node, or a tombstone (a deleted resource does not exist)", () => {
    expect(planPutFile("a.txt", undefined, root, { ifNoneMatch: ["*"] })).toEqual({ created: true });
    expect(planPutFile("a.txt", tombstone(file("a.txt")), root, { ifNoneMatch: ["*"] })).toEqual({ created: true });
    expect(planMakeDirectory("d", tombstone(dir("d")), root, { ifNoneMatch: ["*"] })).toEqual({ created: true });
  });

  it("If-None-Match * fails with PreconditionFailedError on a live resource or directory, naming it and its ETag", () => {
    expect(() => planPutFile("a.txt", file("a.txt", "t1"), root, { ifNoneMatch: ["*"] })).toThrow(
      PreconditionFailedError,
    );
    expect(() => planPutFile("a.txt", file("a.txt", "t1"), root, { ifNoneMatch: ["*"] })).toThrow(
      'if_none_match * given but /a.txt exists (current ETag "t1")',
    );
    // Before the method's own refusal of a directory's name (RFC 9110, 13.2.2): 412, not 403.
    expect(() => planPutFile("d", dir("d", "td"), root, { ifNoneMatch: ["*"] })).toThrow(
      'if_none_match * given but a directory /d/ exists (current ETag "td")',
    );
    expect(() => planMakeDirectory("d", dir("d"), root, { ifNoneMatch: ["*"] })).toThrow(PreconditionFailedError);
  });

  it("If-None-Match with tags fails only on the current tag", () => {
    const target = file("a.txt", "t1");
    expect(planPutFile("a.txt", target, root, { ifNoneMatch: ["t0"] })).toEqual({ created: false });
    expect(() => planPutFile("a.txt", target, root, { ifNoneMatch: ["t0", "t1"] })).toThrow(
      'if_none_match matches the current ETag "t1" of /a.txt',
    );
  });

  it("a missing parent is still NotFoundError, and If-Match is checked too", () => {
    expect(() => planPutFile("d/a.txt", undefined, undefined, { ifNoneMatch: ["*"] })).toThrow(NotFoundError);
    expect(() => planPutFile("a.txt", undefined, root, { ifMatch: ["*"], ifNoneMatch: ["t0"] })).toThrow(
      /does not exist/,
    );
  });
});

describe("planMakeDirectory", () => {
  it("creates a directory where there is none, or only a tombstone", () => {
    expect(planMakeDirectory("d", undefined, root, {})).toEqual({ created: true });
    expect(planMakeDirectory("d", tombstone(file("d")), root, {})).toEqual({ created: true });
    expect(planMakeDirectory("d/e", tombstone(dir("d/e")), dir("d"), {})).toEqual({ created: true });
  });

  it("reports created=false for a directory that exists, the root included", () => {
    expect(planMakeDirectory("d", dir("d"), root, {})).toEqual({ created: false });
    expect(planMakeDirectory("", root, undefined, {})).toEqual({ created: false });
  });

  it("refuses the name of a live resource with ForbiddenError", () => {
    expect(() => planMakeDirectory("a.txt", file("a.txt"), root, {})).toThrow(ForbiddenError);
    expect(() => planMakeDirectory("a.txt", file("a.txt"), root, {})).toThrow(/a resource named \/a.txt exists/);
  });

  it("throws NotFoundError when the parent is missing, deleted, or a resource", () => {
    expect(() => planMakeDirectory("d/e", undefined, undefined, {})).toThrow(NotFoundError);
    expect(() => planMakeDirectory("d/e", undefined, tombstone(dir("d")), {})).toThrow(NotFoundError);
    expect(() => planMakeDirectory("f/e", undefined, file("f"), {})).toThrow(NotFoundError);
  });

  it("honours If-Match", () => {
    expect(planMakeDirectory("d", dir("d", "t"), root, { ifMatch: ["t"] })).toEqual({ created: false });
    expect(planMakeDirectory("d", dir("d", "t"), root, { ifMatch: ["*"] })).toEqual({ created: false });
    expect(() => planMakeDirectory("d", dir("d", "t"), root, { ifMatch: ["u"] })).toThrow(PreconditionFailedError);
    expect(() => planMakeDirectory("d", undefined, root, { ifMatch: ["*"] })).toThrow(PreconditionFailedError);
  });
});

describe("planDelete", () => {
  it("allows deleting a live resource or directory", () => {
    expect(() => planDelete("a.txt", file("a.txt"), undefined)).not.toThrow();
    expect(() => planDelete("d", dir("d"), undefined)).not.toThrow();
  });

  it("refuses the root with ForbiddenError", () => {
    expect(() => planDelete("", root, undefined)).toThrow(ForbiddenError);
    expect(() => planDelete("", root, undefined)).toThrow(/delete the store instead/);
  });

  it("throws NotFoundError for an unknown path", () => {
    expect(() => planDelete("nope", undefined, undefined)).toThrow(NotFoundError);
  });

  it("throws DeletedError with the tombstone's tag for a deleted path", () => {
    const gone = tombstone(file("a.txt"));
    let caught: unknown;
    try {
      planDelete("a.txt", gone, undefined);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(DeletedError);
    expect((caught as DeletedError).tag).toBe(gone.tag);
  });

  it("honours If-Match", () => {
    expect(() => planDelete("a.txt", file("a.txt", "t"), ["t"])).not.toThrow();
    expect(() => planDelete("a.txt", file("a.txt", "t"), ["*"])).not.toThrow();
    expect(() => planDelete("a.txt", file("a.txt", "t"), ["u"])).toThrow(PreconditionFailedError);
  });

  it("reports a tombstone as deleted even when If-Match is given", () => {
    expect(() => planDelete("a.txt", tombstone(file("a.txt")), ["*"])).toThrow(DeletedError);
  });
});

describe("planCreateStore", () => {
  it("allows a new name or the name of a deleted store", () => {
    expect(() => planCreateStore(undefined, "s")).not.toThrow();
    expect(() => planCreateStore({ deleted: true }, "s")).not.toThrow();
  });

  it("refuses the name of a live store with AlreadyExistsError", () => {
    expect(() => planCreateStore({ deleted: false }, "s")).toThrow(AlreadyExistsError);
    expect(() => planCreateStore({ deleted: false }, "s")).toThrow("store s already exists");
  });
});

describe("isExpiredTombstone", () => {
  const config = { name: "s", type: "recursive" as const, settings: { "keep-deleted": "10s" } };

  it("is true once keep-deleted has passed since the deletion, not before", () => {
    expect(isExpiredTombstone({ deleted: true, modified: 1000 }, config, 10_999)).toBe(false);
    expect(isExpiredTombstone({ deleted: true, modified: 1000 }, config, 11_000)).toBe(true);
    expect(isExpiredTombstone({ deleted: true, modified: 1000 }, config, 1_000_000)).toBe(true);
  });

  it("is never true for a live node", () => {
    expect(isExpiredTombstone({ deleted: false, modified: 0 }, config, 1_000_000)).toBe(false);
  });

  it("uses 7 days when the store has no keep-deleted", () => {
    const bare = { name: "s", type: "snapshot" as const, settings: {} };
    expect(isExpiredTombstone({ deleted: true, modified: 0 }, bare, 7 * 86_400_000 - 1)).toBe(false);
    expect(isExpiredTombstone({ deleted: true, modified: 0 }, bare, 7 * 86_400_000)).toBe(true);
  });
});
