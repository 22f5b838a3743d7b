// Vitest global setup: builds dist/ (what `bin/trove.js` runs) when any file
// under src/ is newer than it, for the tests that start the CLI as a child process.

import { execFile } from "node:child_process";
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

async function newestIn(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, (await stat(join(entry.parentPath, entry.name))).mtimeMs);
  }
  return newest;
}

export default async function buildDist(): Promise<void> {
  const built = await stat(join(ROOT, "dist", "cli.js")).then(
    (s) => s.mtimeMs,
    () => 0,
  );
  if (built > (await newestIn(join(ROOT, "src")))) return;
  const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
  try {
    await promisify(execFile)(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: ROOT });
  } catch (err) {
    // tsc still emits JavaScript when it reports type errors; the tests that run dist/ say
    // whether it works. Type errors are the typecheck's business.
    const out = (err as { stdout?: string }).stdout ?? String(err);
    process.stderr.write(`build of dist/ reported errors:\n${out}\n`);
  }
}
