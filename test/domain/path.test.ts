// Resource paths: which names are valid, and how paths split and sort.

import { describe, expect, it } from "vitest";
import { BadRequestError } from "../../src/domain/errors.js";
import {
  ancestorsOf,
  comparePaths,
  descendantRange,
  joinPath,
  MAX_NAME_BYTES,
  MAX_PATH_BYTES,
  nameOf,
  parentOf,
  parsePath,
  validateSegment,
  validateStoreName,
} from "../../src/domain/path.js";

function rejects(fn: () => unknown, message: RegExp): void {
  expect(fn).toThrow(BadRequestError);
  expect(fn).toThrow(message);
}

describe("validateSegment", () => {
  it("accepts ordinary names, dots inside names, spaces and any well-formed Unicode", () => {
    for (const name of ["a", "a.txt", ".hidden", "...", "a b", "été", "日本語", "\u{1F600}", "a..b", "-", "~"]) {
      expect(validateSegment(name)).toBe(name);
    }
  });

  it("rejects an empty segment (a double slash)", () => {
    rejects(() => validateSegment(""), /empty path segment/);
  });

  it('rejects "." and ".."', () => {
    rejects(() => validateSegment("."), /"\."/);
    rejects(() => validateSegment(".."), /"\.\."/);
  });

  it("rejects C0 controls, DEL and C1 controls", () => {
    for (const name of ["a\u0000", "\n", "a\tb", "\u001f", "x\u007f", "\u0080", "\u0085", "\u009f"]) {
      rejects(() => validateSegment(name), /control character/);
    }
  });

  it("rejects a slash inside a name", () => {
    rejects(() => validateSegment("a/b"), /'\/'/);
  });

  it("rejects lone surrogates (not well-formed Unicode)", () => {
    for (const name of ["\uD800", "a\uDC00", "\uDFFFb", "\uDBFF"]) {
      rejects(() => validateSegment(name), /not valid Unicode/);
    }
  });

  it(`accepts ${MAX_NAME_BYTES} bytes of UTF-8 and rejects one more`, () => {
    expect(validateSegment("a".repeat(MAX_NAME_BYTES))).toHaveLength(MAX_NAME_BYTES);
    rejects(() => validateSegment("a".repeat(MAX_NAME_BYTES + 1)), /longer than 255 bytes/);
    // Counted in bytes, not characters: 127 two-byte characters and one byte is 255.
    expect(() => validateSegment(`${"é".repeat(127)}a`)).not.toThrow();
    rejects(() => validateSegment("é".repeat(128)), /longer than 255 bytes/);
  });
});

describe("joinPath and parsePath", () => {
  it("join validated segments with slashes; no segments is the root", () => {
    expect(joinPath(["a", "b", "c.txt"])).toBe("a/b/c.txt");
    expect(joinPath([])).toBe("");
  });

  it("reject a path with any invalid segment", () => {
    rejects(() => joinPath(["a", "..", "b"]), /not allowed/);
    rejects(() => joinPath(["a", "", "b"]), /empty path segment/);
  });

  it(`reject a path longer than ${MAX_PATH_BYTES} bytes`, () => {
    // 17 segments and 16 slashes: 15 x 255 + 254 + 1 + 16 = 4096 bytes, then one byte more.
    const full = Array.from({ length: 15 }, () => "a".repeat(255));
    expect(Buffer.byteLength(joinPath([...full, "b".repeat(254), "c"]))).toBe(4096);
    rejects(() => joinPath([...full, "b".repeat(255), "c"]), /longer than 4096 bytes/);
  });

  it("parsePath strips one leading and one trailing slash", () => {
    expect(parsePath("/a/b/")).toBe("a/b");
    expect(parsePath("a/b")).toBe("a/b");
    expect(parsePath("/")).toBe("");
    expect(parsePath("")).toBe("");
  });

  it("parsePath rejects empty, dot and control-character segments", () => {
    rejects(() => parsePath("a//b"), /empty path segment/);
    rejects(() => parsePath("/a/./b"), /not allowed/);
    rejects(() => parsePath("/a/../b"), /not allowed/);
    rejects(() => parsePath("/a/b\r\n"), /control character/);
  });
});

describe("validateStoreName", () => {
  it("accepts 1 to 64 letters, digits, '.', '_' and '-', starting with a letter or digit", () => {
    for (const name of ["a", "home", "Store_1", "9lives", "a.b-c_d", "x".repeat(64)]) {
      expect(validateStoreName(name)).toBe(name);
    }
  });

  it("rejects anything else", () => {
    for (const name of ["", "-a", ".a", "_a", "a b", "a/b", "é", "x".repeat(65), "a\n"]) {
      rejects(() => validateStoreName(name), /invalid store name/);
    }
  });
});

describe("parentOf, nameOf, ancestorsOf", () => {
  it("split a path into its parent and its name", () => {
    expect(parentOf("a/b/c")).toBe("a/b");
    expect(parentOf("a")).toBe("");
    expect(parentOf("")).toBeUndefined();
    expect(nameOf("a/b/c.txt")).toBe("c.txt");
    expect(nameOf("a")).toBe("a");
  });

  it("list the ancestors nearest first, the root last", () => {
    expect(ancestorsOf("a/b/c")).toEqual(["a/b", "a", ""]);
    expect(ancestorsOf("a")).toEqual([""]);
    expect(ancestorsOf("")).toEqual([]);
  });
});

describe("descendantRange", () => {
  /** In [low, high) under UTF-8 byte order, the order databases compare strings in. */
  function inRange(path: string, range: { low: string; high: string }): boolean {
    return (
      Buffer.compare(Buffer.from(path), Buffer.from(range.low)) >= 0 &&
      Buffer.compare(Buffer.from(path), Buffer.from(range.high)) < 0
    );
  }

  it("bounds the paths below a directory by dir/ and dir0", () => {
    expect(descendantRange("a")).toEqual({ low: "a/", high: "a0" });
    expect(descendantRange("a/b")).toEqual({ low: "a/b/", high: "a/b0" });
  });

  it("holds every descendant and no sibling that merely starts with the same name", () => {
    const range = descendantRange("a");
    for (const below of ["a/b", "a/b/c", "a/.x", "a/\u{1F600}", "a/~", "a/ b"])
      expect(inRange(below, range)).toBe(true);
    for (const outside of ["a", "a.txt", "a-1", "a b", "a0", "a0/x", "ab", "b", "", "A/b"]) {
      expect(inRange(outside, range)).toBe(false);
    }
  });

  it("starts below the root at the empty path", () => {
    const range = descendantRange("");
    expect(range.low).toBe("");
    for (const path of ["a", "a/b", "~", "é", "\uFFFD", "\u{1F600}/x"]) expect(inRange(path, range)).toBe(true);
  });
});

describe("comparePaths", () => {
  it("orders paths as SQLite and MongoDB do: by UTF-8 bytes, so a character above U+FFFF after U+E000-U+FFFF", () => {
    const paths = ["a/b", "a", "a/\u{1F600}", "a/\uFFFD", "a/\uE000", "a/z", "a0", "", "a/é"];
    const byBytes = [...paths].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    expect([...paths].sort(comparePaths)).toEqual(byBytes);
    expect(byBytes.indexOf("a/\u{1F600}")).toBeGreaterThan(byBytes.indexOf("a/\uFFFD"));
    expect(comparePaths("a/b", "a/b")).toBe(0);
    expect(Math.sign(comparePaths("a", "a/b"))).toBe(-1);
  });
});
