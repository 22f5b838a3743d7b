// The code blocks of a Markdown document, as the documentation tests run them, and what the text
// says each one prints (docs/contributing.md, "Examples are tests"):
//
// - A ```text block right after a command block (nothing but blank lines between) is that block's
//   output: each of its lines must be a whole line of what the block printed (stdout and stderr
//   together), in that order; lines it leaves out may come between them.
// - A trailing comment `# prints X` (shell) or `// prints X` (TypeScript, JavaScript) says the
//   command on that line prints the line X. A shell block is run up to that line, its output
//   checked, then the rest (variables and the working directory carry over).
// - In an expected line, `…` stands for any text. Values that differ from run to run match any
//   value of their kind: a tag (12 base64url characters with a letter and a digit, `q3Jx7pZ0aB1c`),
//   a UUID, a JWT (`eyJ…`), an ISO time, an HTTP date, a duration (`0.2 s`, `35 ms`). The
//   server's address is printed as the documents' `127.0.0.1:13242`.

export type Lang = "sh" | "ts" | "js";

const LANGS: Record<string, Lang> = {
  sh: "sh",
  bash: "sh",
  shell: "sh",
  ts: "ts",
  typescript: "ts",
  js: "js",
  javascript: "js",
  mjs: "js",
};

/** A line the text says is printed, and where the text says it. */
export interface Expected {
  where: string;
  text: string;
}

/** A runnable code block: the document's own words, with where they are. */
export interface Block {
  /** `README.md:111`: the opening fence. */
  where: string;
  file: string;
  /** Line of the block's first line of code. */
  line: number;
  lang: Lang;
  code: string;
  /** The lines of the ```text block that follows it. */
  output: Expected[];
}

/** A part of a shell block that ends with a `# prints` comment (or the block's end). */
export interface Step {
  /** Location of its first line. */
  where: string;
  line: number;
  code: string;
  prints: Expected[];
}

export interface ParseOptions {
  /** Only the blocks under the first heading that matches (up to the next heading of its level or above). */
  section?: RegExp;
}

/** The runnable blocks of a document, in order, each with its expected output. */
export function parseDocument(file: string, text: string, options: ParseOptions = {}): Block[] {
  const lines = text.split("\n");
  let from = 0;
  let to = lines.length;
  if (options.section) {
    const section = options.section;
    const start = lines.findIndex((l) => /^#+ /.test(l) && section.test(l));
    if (start < 0) throw new Error(`${file} has no section ${section}`);
    const level = (/^#+/.exec(lines[start] as string) as RegExpExecArray)[0].length;
    from = start;
    const end = lines.findIndex((l, i) => i > start && new RegExp(`^#{1,${level}} `).test(l));
    if (end >= 0) to = end;
  }
  const blocks: Block[] = [];
  let last: Block | undefined;
  let lastEnd = -1;
  for (let i = from; i < to; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i] as string);
    if (!open) continue;
    const close = lines.findIndex((l, j) => j > i && l === "```");
    if (close < 0) throw new Error(`${file}:${i + 1}: a code block that does not end`);
    const fence = open[1] as string;
    const body = lines.slice(i + 1, close);
    const between = lines.slice(lastEnd + 1, i);
    if (fence === "text") {
      if (last && lastEnd >= 0 && between.every((l) => l.trim() === "")) {
        last.output.push(
          ...body.map((l, k) => ({ where: `${file}:${i + 2 + k}`, text: l.trimEnd() })).filter((e) => e.text !== ""),
        );
      }
    } else if (LANGS[fence]) {
      last = {
        where: `${file}:${i + 1}`,
        file,
        line: i + 2,
        lang: LANGS[fence] as Lang,
        code: body.join("\n"),
        output: [],
      };
      blocks.push(last);
    } else {
      // An output or a synopsis that is not a command: it must say so (```text), to be unambiguous.
      throw new Error(`${file}:${i + 1}: a code block without a language (\`\`\`text for output)`);
    }
    lastEnd = close;
    i = close;
  }
  return blocks;
}

const PRINTS = { sh: /\s#\s*prints\s+(.*)$/, ts: /\s\/\/\s*prints\s+(.*)$/, js: /\s\/\/\s*prints\s+(.*)$/ };

/** The lines a block's comments say are printed. */
export function printsOf(block: Block): Expected[] {
  const found: Expected[] = [];
  block.code.split("\n").forEach((l, k) => {
    const m = PRINTS[block.lang].exec(l);
    if (m) found.push({ where: `${block.file}:${block.line + k}`, text: (m[1] as string).trimEnd() });
  });
  return found;
}

/** A shell block cut after each line that carries a `# prints` comment. */
export function stepsOf(block: Block): Step[] {
  const steps: Step[] = [];
  let start = 0;
  const lines = block.code.split("\n");
  const cut = (end: number, prints: Expected[]) => {
    const code = lines.slice(start, end + 1).join("\n");
    if (code.trim() !== "" || prints.length > 0) {
      const line = block.line + start;
      steps.push({ where: `${block.file}:${line}`, line, code, prints });
    }
    start = end + 1;
  };
  lines.forEach((l, k) => {
    const m = PRINTS.sh.exec(l);
    if (m) cut(k, [{ where: `${block.file}:${block.line + k}`, text: (m[1] as string).trimEnd() }]);
  });
  if (start < lines.length) cut(lines.length - 1, []);
  return steps;
}

const TAG_CHARS = "[A-Za-z0-9_-]";
/**
 * Values that differ from run to run: how they are recognised in an expected line, and what
 * they then match (any value of their kind; by default, what recognises them).
 */
const VARIABLE: Array<[RegExp, string?]> = [
  [/…/, ".*"],
  [/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/],
  [/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z/],
  [/[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT/],
  [/eyJ[\w-]*\.[\w-]+\.[\w-]+/],
  [/\b\d+(?:\.\d+)? s\b/],
  [/\b\d+ ms\b/],
  // A tag has a letter and a digit in the documents' examples, and may lack either when served.
  [
    new RegExp(
      `(?<!${TAG_CHARS})(?=${TAG_CHARS}{0,11}[0-9])(?=${TAG_CHARS}{0,11}[A-Za-z])${TAG_CHARS}{12}(?!${TAG_CHARS})`,
    ),
    `${TAG_CHARS}{12}`,
  ],
];
const ANY_VARIABLE = new RegExp(VARIABLE.map(([r]) => `(${r.source})`).join("|"), "g");

/** The pattern an expected line stands for: the whole line, variable parts matching any value of their kind. */
export function patternOf(expected: string): RegExp {
  let source = "";
  let at = 0;
  for (const m of expected.matchAll(ANY_VARIABLE)) {
    source += literal(expected.slice(at, m.index));
    const [recognised, matches] = VARIABLE[m.slice(1).findIndex((g) => g !== undefined)] as [RegExp, string?];
    source += matches ?? recognised.source;
    at = (m.index as number) + m[0].length;
  }
  source += literal(expected.slice(at));
  return new RegExp(`^${source}$`);
}

function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Checks that each expected line is a whole line of `output`, in order, from `from` on. Returns
 * the index after the last line matched, or throws an Error that says where the text says it.
 */
export function expectPrinted(expected: Expected[], output: string, from = 0): number {
  const lines = output.split("\n").map((l) => l.replace(/\r$/, "").trimEnd());
  let at = from;
  for (const e of expected) {
    const pattern = patternOf(e.text);
    const found = lines.findIndex((l, i) => i >= at && pattern.test(l));
    if (found < 0) {
      const shown = lines.slice(at).join("\n");
      throw new Error(
        `${e.where} says this prints\n  ${e.text}\nbut no line${at > 0 ? " after the ones already matched" : ""} of the output is that:\n${shown.length > 4000 ? `…${shown.slice(-4000)}` : shown}`,
      );
    }
    at = found + 1;
  }
  return at;
}
