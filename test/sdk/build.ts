// Builds sdk/dist (what the SDK's bin and its npm package run) when a file under
// sdk/src is newer than it; one build at a time across test processes.

import { execFile } from "node:child_process";
import { mkdir, readdir, rmdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const SDK = join(ROOT, "sdk");
export const SDK_BIN = join(SDK, "bin", "trove.js");
export const ROOT_BIN = join(ROOT, "bin", "trove.js");

async function newestIn(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, (await stat(join(entry.parentPath, entry.name))).mtimeMs);
  }
  return newest;
}

async function built(): Promise<boolean> {
  const out = await stat(join(SDK, "dist", "cli", "main.js")).then(
    (s) => s.mtimeMs,
    () => 0,
  );
  return out > (await newestIn(join(SDK, "src")));
}

export async function ensureSdkBuilt(): Promise<void> {
  if (await built()) return;
  const lock = join(SDK, ".build-lock");
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`${lock} held for two minutes: remove it if no build runs`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    if (await built()) return;
    const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
    await promisify(execFile)(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: SDK });
  } finally {
    await rmdir(lock);
  }
}
