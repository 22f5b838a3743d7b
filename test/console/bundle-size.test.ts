// Issue 30, quality bar: the console's first load stays under 250 KiB gzipped, without the graph.
// Measured on the built console (dist/console/, rebuilt when console/ changed), gzipped at level 9
// as src/server/console.ts serves it: index.html, the scripts and stylesheets it names, their
// static imports, and the landing screen (stores) with its static imports. The graph's chunk
// (dagre) must be in none of them: it loads with the Graph tab.

import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { beforeAll, expect, it } from "vitest";
import { buildConsole } from "./browser.js";

const DIST = fileURLToPath(new URL("../../dist/console/", import.meta.url));
const LIMIT = 250 * 1024;

const gzipped = async (file: string) => gzipSync(await readFile(join(DIST, file)), { level: 9 }).byteLength;

/** The files a script pulls in before it runs: its static imports, and theirs (not `import()`). */
async function staticClosure(entry: string): Promise<string[]> {
  const seen = new Set<string>();
  const visit = async (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = await readFile(join(DIST, file), "utf8");
    for (const m of text.matchAll(/(?:\bfrom|\bimport)\s*"\.\/([^"]+\.js)"/g)) await visit(`assets/${m[1]}`);
  };
  await visit(entry);
  return [...seen];
}

beforeAll(async () => {
  await buildConsole();
}, 120_000);

it("the first load (index.html, entry, stylesheet, the stores screen and their static imports) is under 250 KiB gzipped, and holds no graph (issue 30)", async () => {
  const html = await readFile(join(DIST, "index.html"), "utf8");
  const named = [...html.matchAll(/(?:src|href)="\/console\/(assets\/[^"]+)"/g)].map((m) => m[1] as string);
  const entry = named.find((f) => f.endsWith(".js"));
  expect(entry).toBeDefined();
  const index = await readFile(join(DIST, entry as string), "utf8");
  const stores = /import\("\.\/(stores-[^"]+\.js)"\)/.exec(index)?.[1];
  expect(stores, "the stores screen is its own chunk, loaded by import()").toBeDefined();
  const files = new Set(["index.html", ...named]);
  for (const script of [entry as string, `assets/${stores}`]) for (const f of await staticClosure(script)) files.add(f);
  const sizes = await Promise.all([...files].map(async (f) => [f, await gzipped(f)] as const));
  const total = sizes.reduce((sum, [, n]) => sum + n, 0);
  console.log(
    `console first load: ${(total / 1024).toFixed(1)} KiB gzipped (${sizes.map(([f, n]) => `${f} ${n}`).join(", ")})`,
  );
  expect([...files].filter((f) => f.includes("graph"))).toEqual([]);
  expect(index).not.toContain("dagre");
  expect(total).toBeLessThan(LIMIT);
  // The graph is loaded by the insights chunk, with the Graph tab; the entry never names it.
  expect(index).not.toMatch(/insights-graph-/);
  const insights = /import\("\.\/(insights-[^"g][^"]*\.js)"\)/.exec(index)?.[1];
  expect(await readFile(join(DIST, "assets", insights as string), "utf8")).toMatch(
    /import\("\.\/insights-graph-[^"]+\.js"\)/,
  );
});
