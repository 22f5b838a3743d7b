// REST API versions: /resources/v1/ and /resources/v2/ serve the same routes through the same
// code; version 1 differs as resource-server-v2.md says (docs/rest.md, "Version 1").

import type { Caller, Operation } from "../auth/caller.js";
import { NotFoundError } from "../domain/errors.js";

export type ApiVersion = 1 | 2;

/** `/resources/v1` or `/resources/v2`, without the trailing slash. */
export function prefixOf(version: ApiVersion): string {
  return `/resources/v${version}`;
}

/** The version of a path under /resources/, and what follows `/resources/v{n}/`; undefined for another path. */
export function splitVersion(path: string): { version: ApiVersion; rest: string } | undefined {
  if (path.startsWith("/resources/v2/")) return { version: 2, rest: path.slice(14) };
  if (path.startsWith("/resources/v1/")) return { version: 1, rest: path.slice(14) };
  return undefined;
}

/**
 * The feature version 1 clients take for granted: a directory's tag changes whenever something
 * below it changes. Version 1 serves only the stores that have it.
 */
export const VERSION_1_FEATURE = "sync-recursive";

/** Whether a store with these features is served by `version`. */
export function servesStore(version: ApiVersion, features: readonly string[]): boolean {
  return version === 2 || features.includes(VERSION_1_FEATURE);
}

/** The refusal of every version 1 request that names a store without sync-recursive: 404 with its reason. */
export function notInVersion1(store: string, features: readonly string[]): NotFoundError {
  return new NotFoundError(
    `store ${store} is not served by version 1 of the API: it lacks the ${VERSION_1_FEATURE} feature ` +
      `(its features: ${features.join(", ")}); use /resources/v2/`,
  );
}

/** How a REST route asks a store's features (StoreCore.featuresOfStore); undefined: no such store. */
export type StoreFeatures = (store: string) => Promise<string[] | undefined>;

/**
 * Refuses a version 1 request on a store that version 1 does not serve. A caller who may not do
 * `operation` there is left to the core's own refusal (401), so that it learns nothing of the store.
 */
export async function checkVersion1Store(
  features: StoreFeatures,
  caller: Caller,
  operation: Operation,
  store: string,
  path: string,
): Promise<void> {
  if (!caller.may(operation, { store, path })) return;
  const found = await features(store);
  if (found !== undefined && !servesStore(1, found)) throw notInVersion1(store, found);
}
