// The convention the documentation tests read (snippets.ts): which blocks run, what a ```text
// block and a `# prints` comment promise, and what counts as printing it.

import { describe, expect, it } from "vitest";
import { expectPrinted, parseDocument, patternOf, printsOf, stepsOf } from "./snippets.js";

const DOC = [
  "# Title", // 1
  "",
  "```sh", // 3
  "echo one",
  "echo two   # prints two",
  "echo three",
  "```",
  "",
  "```text", // 9
  "one",
  "three",
  "```",
  "",
  "Some words.",
  "",
  "```text", // 16: not right after a command block: an illustration
  "nothing checked",
  "```",
  "",
  "## Quick start", // 20
  "",
  "```ts", // 22
  'console.log("hi"); // prints hi',
  "```",
  "",
  "## Next",
  "",
  "```js",
  "x();",
  "```",
].join("\n");

describe("which blocks run and what they promise", () => {
  it("runnable blocks in order, each with the lines of the ```text block right after it", () => {
    const blocks = parseDocument("doc.md", DOC);
    expect(blocks.map((b) => [b.where, b.lang, b.line])).toEqual([
      ["doc.md:3", "sh", 4],
      ["doc.md:22", "ts", 23],
      ["doc.md:28", "js", 29],
    ]);
    expect(blocks[0]?.output).toEqual([
      { where: "doc.md:10", text: "one" },
      { where: "doc.md:11", text: "three" },
    ]);
    expect(blocks[1]?.output).toEqual([]);
  });

  it("only the section asked for, up to the next heading of its level", () => {
    const blocks = parseDocument("doc.md", DOC, { section: /^## Quick start$/ });
    expect(blocks.map((b) => b.where)).toEqual(["doc.md:22"]);
    expect(() => parseDocument("doc.md", DOC, { section: /^## Missing$/ })).toThrow("doc.md has no section");
  });

  it("a block without a language is refused, with its location", () => {
    expect(() => parseDocument("doc.md", "a\n\n```\n$ trove ls\n```\n")).toThrow(
      "doc.md:3: a code block without a language",
    );
  });

  it("a shell block is cut after each line with a `# prints` comment", () => {
    const [block] = parseDocument("doc.md", DOC);
    expect(stepsOf(block as NonNullable<typeof block>)).toEqual([
      {
        where: "doc.md:4",
        line: 4,
        code: "echo one\necho two   # prints two",
        prints: [{ where: "doc.md:5", text: "two" }],
      },
      { where: "doc.md:6", line: 6, code: "echo three", prints: [] },
    ]);
  });

  it("`// prints` comments of TypeScript and JavaScript", () => {
    const blocks = parseDocument("doc.md", DOC);
    expect(printsOf(blocks[1] as NonNullable<(typeof blocks)[1]>)).toEqual([{ where: "doc.md:23", text: "hi" }]);
  });
});

describe("what counts as printing an expected line", () => {
  it("the whole line, its variable parts matching any value of their kind", () => {
    const line = "created home/a.json q3Jx7pZ0aB1c";
    expect(patternOf(line).test("created home/a.json Zk_2mQ9-T4wX")).toBe(true);
    expect(patternOf(line).test("created home/a.json Zk_2mQ9-T4w")).toBe(false);
    expect(patternOf(line).test("updated home/a.json Zk_2mQ9-T4wX")).toBe(false);
    expect(patternOf(line).test("created home/a.json q3Jx7pZ0aB1c and more")).toBe(false);
    expect(patternOf("id 6cde184b-69fe-45c5-954d-8be6461198ca").test("id 1f969d4f-3a81-4519-862b-9e4ddcf12be8")).toBe(
      true,
    );
    expect(patternOf("at 2026-11-27T15:22:44.347Z").test("at 2027-01-02T03:04:05.006Z")).toBe(true);
    expect(patternOf("Date: Fri, 27 Nov 2026 15:22:19 GMT").test("Date: Mon, 01 Dec 2026 08:00:00 GMT")).toBe(true);
    expect(patternOf("3.0 KiB, 0.1 s").test("3.0 KiB, 12.25 s")).toBe(true);
    expect(patternOf("3.0 KiB, 0.1 s").test("3.1 KiB, 0.1 s")).toBe(false);
    expect(patternOf("eyJhbGciOiJFUzI1NiIs…").test("eyJhbGciOiJFUzI1NiIsImtpZCI6Ik.eyJ0cm92.QoQtzX")).toBe(true);
  });

  it("… stands for any text; everything else is literal", () => {
    expect(patternOf('…"status":"generated"…').test('{"id":["x"],"status":"generated","href":"/r"}')).toBe(true);
    expect(patternOf("a.b (c) [d] $e").test("a.b (c) [d] $e")).toBe(true);
    expect(patternOf("a.b").test("axb")).toBe(false);
    // A word of twelve letters without a digit is not a tag.
    expect(patternOf("Content-Type").test("Content-Typo")).toBe(false);
  });

  it("expected lines are found in order, other lines may come between", () => {
    const output = "HTTP/1.1 201 Created\r\nServer: resources/1.0\r\n\r\n{}\nnext\n";
    const e = (text: string) => ({ where: "doc.md:7", text });
    expect(expectPrinted([e("HTTP/1.1 201 Created"), e("{}")], output)).toBe(4);
    expect(() => expectPrinted([e("{}"), e("HTTP/1.1 201 Created")], output)).toThrow(
      /^doc\.md:7 says this prints\n {2}HTTP\/1\.1 201 Created\nbut no line after the ones already matched/,
    );
    expect(() => expectPrinted([e("HTTP/1.1 200 OK")], output)).toThrow("doc.md:7 says this prints");
  });
});
