// The change feed's rules: where a follower's cursor stands, and how a change is named.

import { describe, expect, it } from "vitest";
import { idrUri, operationOf, positionOf } from "../../src/domain/events.js";

describe("positionOf", () => {
  const store = { deleted: false, lastEventId: 20, purgedEventId: 5 };

  it("follows from the cursor while no event after it can have been purged", () => {
    expect(positionOf(store, 5)).toEqual({ since: 5 });
    expect(positionOf(store, 12)).toEqual({ since: 12 });
    expect(positionOf(store, 20)).toEqual({ since: 20 });
  });

  it("resets to the last event a cursor older than the purged events", () => {
    expect(positionOf(store, 4)).toEqual({ reset: 20 });
    expect(positionOf(store, 0)).toEqual({ reset: 20 });
  });

  it("resets a cursor beyond the last event (from another life of the store)", () => {
    expect(positionOf(store, 21)).toEqual({ reset: 20 });
  });

  it("resets for a deleted store, and from 0 for an unknown one", () => {
    expect(positionOf({ ...store, deleted: true }, 12)).toEqual({ reset: 20 });
    expect(positionOf(undefined, 12)).toEqual({ reset: 0 });
  });

  it("follows a new store from 0", () => {
    expect(positionOf({ deleted: false, lastEventId: 1, purgedEventId: 0 }, 0)).toEqual({ since: 0 });
  });
});

describe("idrUri", () => {
  it("is idr://{store}/{path} with each segment percent-encoded", () => {
    expect(idrUri("home", "a/b.txt")).toBe("idr://home/a/b.txt");
    expect(idrUri("home", "a b/c%d/é?#")).toBe("idr://home/a%20b/c%25d/%C3%A9%3F%23");
    expect(idrUri("home", "")).toBe("idr://home/");
  });
});

describe("operationOf", () => {
  it("names a tombstone's change delete and any other modify", () => {
    expect(operationOf({ deleted: true })).toBe("delete");
    expect(operationOf({ deleted: false })).toBe("modify");
  });
});
