// Entity tags: how they are made, parsed from If-Match / If-None-Match, and compared.

import { describe, expect, it } from "vitest";
import { BadRequestError } from "../../src/domain/errors.js";
import { newTag, parseTagList, quoteTag, tagMatches } from "../../src/domain/etag.js";

describe("newTag and quoteTag", () => {
  it("makes distinct tags that need no escaping in a header, an XML attribute or a poll line", () => {
    const tags = new Set(Array.from({ length: 1000 }, () => newTag()));
    expect(tags.size).toBe(1000);
    for (const tag of tags) expect(tag).toMatch(/^[A-Za-z0-9_-]{12}$/);
  });

  it("quotes a tag as a strong entity tag", () => {
    expect(quoteTag("abc")).toBe('"abc"');
  });
});

describe("parseTagList", () => {
  it("accepts a quoted tag", () => {
    expect(parseTagList('"abc"')).toEqual(["abc"]);
  });

  it("accepts an unquoted tag", () => {
    expect(parseTagList("abc")).toEqual(["abc"]);
  });

  it("accepts a W/ prefix and ignores it, quoted or not", () => {
    expect(parseTagList('W/"abc"')).toEqual(["abc"]);
    expect(parseTagList("W/abc")).toEqual(["abc"]);
  });

  it("accepts *", () => {
    expect(parseTagList("*")).toEqual(["*"]);
    expect(parseTagList(" * ")).toEqual(["*"]);
  });

  it("accepts a comma-separated list with spaces and empty elements, keeping the order", () => {
    expect(parseTagList(' "a" , b,W/"c",, "d"')).toEqual(["a", "b", "c", "d"]);
  });

  it("rejects a quote left open, text after the closing quote, or a quote inside", () => {
    for (const header of ['"abc', 'abc"', '"a"b', 'a"b', '"', 'W/"abc', '"a"b"']) {
      expect(() => parseTagList(header)).toThrow(BadRequestError);
      expect(() => parseTagList(header)).toThrow(/malformed entity tag/);
    }
  });

  it("rejects spaces and control characters inside a tag", () => {
    for (const header of ['"a b"', "a b", '"a\tb"', "a\u0001"]) {
      expect(() => parseTagList(header)).toThrow(BadRequestError);
    }
  });

  it("rejects an empty header or a list of nothing but commas", () => {
    for (const header of ["", "   ", ",", " , , "]) {
      expect(() => parseTagList(header)).toThrow(BadRequestError);
      expect(() => parseTagList(header)).toThrow(/empty entity tag list/);
    }
  });
});

describe("tagMatches", () => {
  it("matches when the stored tag is in the list", () => {
    expect(tagMatches(["a", "b"], "b")).toBe(true);
    expect(tagMatches(["a"], "b")).toBe(false);
  });

  it("compares tags exactly", () => {
    expect(tagMatches(["ABC"], "abc")).toBe(false);
    expect(tagMatches(["abc "], "abc")).toBe(false);
  });

  it("* matches any existing resource", () => {
    expect(tagMatches(["*"], "anything")).toBe(true);
    expect(tagMatches(["x", "*"], "anything")).toBe(true);
  });

  it("nothing matches an absent resource, not even *", () => {
    expect(tagMatches(["*"], undefined)).toBe(false);
    expect(tagMatches(["a"], undefined)).toBe(false);
  });
});
