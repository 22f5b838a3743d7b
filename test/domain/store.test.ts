// Store configuration: types, durations, and how a client's settings merge over the current ones.

import { describe, expect, it } from "vitest";
import { BadRequestError } from "../../src/domain/errors.js";
import {
  DEFAULT_KEEP_DELETED,
  featuresOf,
  keepDeletedMillis,
  parseDuration,
  resolveStoreConfig,
  type StoreConfig,
} from "../../src/domain/store.js";

const REPORTED = {
  "filesystem-location": "/data/blobs",
  "database-driver": "better-sqlite3",
  "database-lock-timeout": "5000",
};

describe("featuresOf", () => {
  it("gives sync and the store type's own feature", () => {
    expect(featuresOf("recursive")).toEqual(["sync", "sync-recursive"]);
    expect(featuresOf("snapshot")).toEqual(["sync", "sync-snapshot"]);
  });
});

describe("parseDuration", () => {
  it("reads a whole number of seconds", () => {
    expect(parseDuration("10")).toBe(10_000);
    expect(parseDuration("0")).toBe(0);
  });

  it("reads ms, s, m, h and d", () => {
    expect(parseDuration("1500ms")).toBe(1500);
    expect(parseDuration("1s")).toBe(1000);
    expect(parseDuration("5m")).toBe(300_000);
    expect(parseDuration("2h")).toBe(7_200_000);
    expect(parseDuration("7d")).toBe(604_800_000);
  });

  it("ignores surrounding spaces", () => {
    expect(parseDuration(" 3d ")).toBe(3 * 86_400_000);
  });

  it("rejects anything else with a message that shows the form", () => {
    for (const text of ["", "d", "1.5s", "-1", "+1", "1w", "1 s", "1S", "1e3", "1dd", "1234567890123"]) {
      expect(() => parseDuration(text)).toThrow(BadRequestError);
      expect(() => parseDuration(text)).toThrow(/invalid duration .*e\.g\. 7d/);
    }
  });
});

describe("keepDeletedMillis", () => {
  it("reads the store's keep-deleted, 7 days when it has none", () => {
    expect(keepDeletedMillis({ name: "s", type: "recursive", settings: { "keep-deleted": "1s" } })).toBe(1000);
    expect(DEFAULT_KEEP_DELETED).toBe("7d");
    expect(keepDeletedMillis({ name: "s", type: "recursive", settings: {} })).toBe(7 * 86_400_000);
  });
});

describe("resolveStoreConfig", () => {
  const current: StoreConfig = { name: "s", type: "snapshot", settings: { "keep-deleted": "1d" } };

  it("creates a recursive store keeping deleted resources 7 days by default", () => {
    expect(resolveStoreConfig({ name: "s" }, undefined, REPORTED)).toEqual({
      name: "s",
      type: "recursive",
      settings: { "keep-deleted": "7d", "keep-versions": "30d" },
    });
  });

  it("takes the given type and keep-deleted, trimmed", () => {
    const config = resolveStoreConfig(
      { name: "s", type: "snapshot", settings: [{ name: "keep-deleted", value: " 2h " }] },
      undefined,
      REPORTED,
    );
    expect(config).toEqual({ name: "s", type: "snapshot", settings: { "keep-deleted": "2h", "keep-versions": "30d" } });
  });

  it("keeps the current type and settings of an update that gives none", () => {
    expect(resolveStoreConfig({ name: "s" }, current, REPORTED)).toEqual(current);
    expect(resolveStoreConfig({ name: "s", type: "" }, current, REPORTED)).toEqual(current);
  });

  it("changes only what an update gives", () => {
    expect(resolveStoreConfig({ name: "s", type: "recursive" }, current, REPORTED)).toEqual({
      ...current,
      type: "recursive",
    });
    expect(
      resolveStoreConfig({ name: "s", settings: [{ name: "keep-deleted", value: "30m" }] }, current, REPORTED),
    ).toEqual({ ...current, settings: { "keep-deleted": "30m" } });
  });

  it("does not change the current configuration it merges over", () => {
    resolveStoreConfig({ name: "s", settings: [{ name: "keep-deleted", value: "30m" }] }, current, REPORTED);
    expect(current.settings).toEqual({ "keep-deleted": "1d" });
  });

  it("rejects an invalid store name", () => {
    expect(() => resolveStoreConfig({ name: "bad name" }, undefined, REPORTED)).toThrow(BadRequestError);
  });

  it("rejects an unknown type, naming the valid ones", () => {
    expect(() => resolveStoreConfig({ name: "s", type: "flat" }, undefined, REPORTED)).toThrow(
      /unknown store type "flat": use one of recursive, snapshot/,
    );
  });

  it("rejects an invalid keep-deleted", () => {
    expect(() =>
      resolveStoreConfig({ name: "s", settings: [{ name: "keep-deleted", value: "forever" }] }, undefined, REPORTED),
    ).toThrow(/invalid duration "forever"/);
  });

  it("rejects a setting given twice", () => {
    const settings = [
      { name: "keep-deleted", value: "1d" },
      { name: "keep-deleted", value: "2d" },
    ];
    expect(() => resolveStoreConfig({ name: "s", settings }, undefined, REPORTED)).toThrow(
      /setting "keep-deleted" given twice/,
    );
  });

  it("rejects an unknown setting", () => {
    expect(() =>
      resolveStoreConfig({ name: "s", settings: [{ name: "colour", value: "red" }] }, undefined, REPORTED),
    ).toThrow(/unknown setting "colour"/);
  });

  it("accepts reported settings sent back unchanged, and does not store them", () => {
    const settings = [
      { name: "filesystem-location", value: "/data/blobs" },
      { name: "database-driver", value: "better-sqlite3" },
      { name: "keep-deleted", value: "1d" },
      { name: "database-lock-timeout", value: "5000" },
    ];
    expect(resolveStoreConfig({ name: "s", settings }, current, REPORTED)).toEqual(current);
  });

  it("refuses a reported setting with a new value", () => {
    for (const [name, value] of [
      ["filesystem-location", "/elsewhere"],
      ["database-driver", "postgres"],
      ["database-lock-timeout", "5000 "],
    ] as const) {
      expect(() => resolveStoreConfig({ name: "s", settings: [{ name, value }] }, current, REPORTED)).toThrow(
        new RegExp(`setting "${name}" is managed by the server and cannot be changed`),
      );
    }
  });
});
