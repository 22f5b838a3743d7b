// Paths of the console: a store path ("" is the root, no leading or trailing slash, as the API
// has them), the console URL that shows it, and the breadcrumbs from the store's root to it.

export const CONSOLE_ROOT = "/console/";

/** "a/b" + "c" = "a/b/c"; the root is "". */
export function joinPath(dir: string, name: string): string {
  return dir === "" ? name : `${dir}/${name}`;
}

/** The directory holding `path` ("" for a top-level entry and for the root itself). */
export function parentPath(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : path.slice(0, slash);
}

/** The last segment of a path. */
export function baseName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

/** A path as the API wants it: no leading, trailing or doubled slashes. */
export function normalizePath(path: string): string {
  return path
    .split("/")
    .filter((s) => s !== "")
    .join("/");
}

/** Why a name cannot be a resource or directory name, or undefined when it can. */
export function nameProblem(name: string): string | undefined {
  if (name.trim() === "") return "a name is required";
  if (name.includes("/")) return "a name cannot contain /";
  if (name === "." || name === "..") return `${name} is not a name`;
  if (/[\x00-\x1f\x7f]/.test(name)) return "a name cannot contain control characters";
  return undefined;
}

const encodeSegments = (path: string) => path.split("/").map(encodeURIComponent).join("/");

/** The console URL of a directory (or file) of a store. */
export function browseHref(store: string, path = ""): string {
  const tail = path === "" ? "" : `${encodeSegments(path)}`;
  return `${CONSOLE_ROOT}browse/${encodeURIComponent(store)}/${tail}`;
}

/** A browse URL showing the directory as of a moment (`?as-of=`, docs/history.md); as it is now without one. */
export function asOfHref(href: string, asOf: string | undefined): string {
  return asOf ? `${href}?as-of=${encodeURIComponent(asOf)}` : href;
}

/** The moment a browse URL's query names (`?as-of=`), or "" for now. */
export function asOfOf(search: string): string {
  return new URLSearchParams(search).get("as-of")?.trim() ?? "";
}

/**
 * The moment of a `datetime-local` field (the browser's zone, no zone in the value) as the API
 * takes it: an ISO 8601 instant in UTC. Undefined for an empty or invalid value.
 */
export function momentOfLocal(value: string): string | undefined {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(value)) return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** The store and path a /console/browse/... URL names; undefined for any other URL or a bad escape. */
export function parseBrowseHref(pathname: string): { store: string; path: string } | undefined {
  const prefix = `${CONSOLE_ROOT}browse/`;
  if (!pathname.startsWith(prefix)) return undefined;
  const segments = pathname
    .slice(prefix.length)
    .split("/")
    .filter((s) => s !== "");
  try {
    const [store, ...rest] = segments.map(decodeURIComponent);
    if (store === undefined || store === "") return undefined;
    return { store, path: rest.join("/") };
  } catch {
    return undefined;
  }
}

/** The REST v2 URL of a resource (uploads). */
export function restDataUrl(store: string, path: string): string {
  return `/resources/v2/data/${encodeURIComponent(store)}/${encodeSegments(path)}`;
}

export interface Crumb {
  label: string;
  href: string;
  /** The last crumb is the page the user is on. */
  current: boolean;
}

/** Stores › store › a › b, each a link; the last one current. */
export function breadcrumbs(store: string, path: string): Crumb[] {
  const crumbs: Crumb[] = [{ label: "Stores", href: CONSOLE_ROOT, current: false }];
  crumbs.push({ label: store, href: browseHref(store), current: path === "" });
  const segments = path === "" ? [] : path.split("/");
  segments.forEach((segment, i) => {
    crumbs.push({
      label: segment,
      href: browseHref(store, segments.slice(0, i + 1).join("/")),
      current: i === segments.length - 1,
    });
  });
  return crumbs;
}

/** The directories from the root to `path` (for the tree): "", "a", "a/b". */
export function ancestors(path: string): string[] {
  const out = [""];
  const segments = path === "" ? [] : path.split("/");
  for (let i = 1; i <= segments.length; i++) out.push(segments.slice(0, i).join("/"));
  return out;
}
