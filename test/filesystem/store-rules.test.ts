// Issue 17, item 1, the pure rules (src/domain/store.ts): type filesystem, its features, and its
// own settings filesystem-location (required, absolute, fixed) and filesystem-temp.

import { describe, expect, it } from "vitest";
import { featuresOf, hasRecursiveTags, resolveStoreConfig } from "../../src/domain/store.js";

const REPORTED = { "filesystem-location": "/data/blobs", "filesystem-temp": "/data/tmp" };
const input = (settings: Record<string, string>, type = "filesystem") => ({
  name: "team",
  type,
  settings: Object.entries(settings).map(([name, value]) => ({ name, value })),
});

describe("store type filesystem", () => {
  it("has the features sync and sync-recursive, and recursive directory tags", () => {
    expect(featuresOf("filesystem")).toEqual(["sync", "sync-recursive"]);
    expect(hasRecursiveTags("filesystem")).toBe(true);
    expect(hasRecursiveTags("snapshot")).toBe(false);
  });

  it("keeps filesystem-location and filesystem-temp as its own settings, normalized", () => {
    const config = resolveStoreConfig(
      input({ "filesystem-location": "/srv/team/", "filesystem-temp": "/var/tmp//trove/../up" }),
      undefined,
      REPORTED,
    );
    expect(config).toEqual({
      name: "team",
      type: "filesystem",
      settings: {
        "keep-deleted": "7d",
        "keep-versions": "0",
        "filesystem-location": "/srv/team",
        "filesystem-temp": "/var/tmp/up",
      },
    });
  });

  it("requires filesystem-location, as an absolute path", () => {
    expect(() => resolveStoreConfig(input({}), undefined, REPORTED)).toThrow(
      "a filesystem store needs the setting filesystem-location: the absolute path of an existing directory",
    );
    expect(() => resolveStoreConfig(input({ "filesystem-location": "srv" }), undefined, REPORTED)).toThrow(
      'filesystem-location must be the absolute path of a directory, not "srv"',
    );
    expect(() => resolveStoreConfig(input({ "filesystem-location": "/a\0b" }), undefined, REPORTED)).toThrow(
      /must be the absolute path of a directory/,
    );
  });

  it("keeps filesystem-location fixed on update, and lets filesystem-temp change", () => {
    const current = resolveStoreConfig(input({ "filesystem-location": "/srv/team" }), undefined, REPORTED);
    expect(() => resolveStoreConfig(input({ "filesystem-location": "/srv/other" }, ""), current, REPORTED)).toThrow(
      "the filesystem-location of store team cannot be changed: delete the store and create another one",
    );
    const same = resolveStoreConfig(
      input({ "filesystem-location": "/srv/team/", "keep-deleted": "1h" }, ""),
      current,
      REPORTED,
    );
    expect(same.settings).toEqual({ "keep-deleted": "1h", "keep-versions": "0", "filesystem-location": "/srv/team" });
    const moved = resolveStoreConfig(input({ "filesystem-temp": "/var/up" }, ""), current, REPORTED);
    expect(moved.settings["filesystem-temp"]).toBe("/var/up");
  });

  it("refuses a change of type to or from filesystem", () => {
    const fs = resolveStoreConfig(input({ "filesystem-location": "/srv/team" }), undefined, REPORTED);
    expect(() => resolveStoreConfig(input({}, "recursive"), fs, REPORTED)).toThrow(
      "store team is of type filesystem and cannot become recursive: delete it and create it again",
    );
    const plain = resolveStoreConfig(input({}, "recursive"), undefined, REPORTED);
    expect(() => resolveStoreConfig(input({ "filesystem-location": "/srv" }), plain, REPORTED)).toThrow(
      "store team is of type recursive and cannot become filesystem: delete it and create it again",
    );
  });

  it("other types still treat filesystem-location as the deployment's, accepted only unchanged", () => {
    expect(
      resolveStoreConfig(input({ "filesystem-location": "/data/blobs" }, "recursive"), undefined, REPORTED).settings,
    ).toEqual({
      "keep-deleted": "7d",
      "keep-versions": "30d",
    });
    expect(() =>
      resolveStoreConfig(input({ "filesystem-location": "/srv" }, "recursive"), undefined, REPORTED),
    ).toThrow('setting "filesystem-location" is managed by the server and cannot be changed');
  });
});
