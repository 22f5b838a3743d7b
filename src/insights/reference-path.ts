// Paths inside an environment, as the report writes them ("/blocks/footer.block"), and the
// resolution of a reference, written relative to the referring resource, to such a path.

import { validateSegment } from "../domain/path.js";

/** The environment path of a resource given with or without a leading slash. */
export function environmentPath(path: string): string {
  const trimmed = path.replace(/^\/+/, "").replace(/\/+$/, "");
  return `/${trimmed}`;
}

/** The last segment of a path. */
export function baseName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

const PLAIN_SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,200}$/;

export type Resolution = { ok: true; absolutePath: string } | { ok: false; reason: string };

/**
 * Resolves `relative` against the directory of the resource at `from` (an environment path).
 * `.` and `..` segments are allowed; the result may not leave the environment.
 */
export function resolveReference(from: string, relative: string): Resolution {
  if (relative === "") return { ok: false, reason: "is empty" };
  if (relative.startsWith("/")) {
    return { ok: false, reason: "starts with '/': references are relative to the referring resource" };
  }
  if (relative.endsWith("/")) return { ok: false, reason: "ends with '/': a reference names a resource" };
  // The referring resource's directory, without leading slash: "" at the top.
  const dir = from.slice(from.startsWith("/") ? 1 : 0, Math.max(0, from.lastIndexOf("/")));
  const segments = dir === "" ? [] : dir.split("/");
  for (const segment of relative.split("/")) {
    if (segment === ".") continue;
    if (segment === "..") {
      if (segments.length === 0) return { ok: false, reason: "goes above the top of the environment" };
      segments.pop();
      continue;
    }
    // Most names are plain; only the others need the full check of src/domain/path.ts.
    if (!PLAIN_SEGMENT.test(segment)) {
      try {
        validateSegment(segment);
      } catch (error) {
        return { ok: false, reason: `is not a valid path: ${(error as Error).message}` };
      }
    }
    segments.push(segment);
  }
  if (segments.length === 0) return { ok: false, reason: "names the environment itself" };
  return { ok: true, absolutePath: `/${segments.join("/")}` };
}
