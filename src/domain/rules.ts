// What a write may do, given what is stored. Pure: adapters call these inside
// their atomic section, with the nodes they read there.

import { AlreadyExistsError, DeletedError, ForbiddenError, NotFoundError, PreconditionFailedError } from "./errors.js";
import { tagMatches } from "./etag.js";
import type { StoreConfig } from "./store.js";
import { keepDeletedMillis } from "./store.js";

/** The part of a stored node the rules look at. */
export interface NodeState {
  path: string;
  directory: boolean;
  deleted: boolean;
  tag: string;
}

function live<T extends NodeState>(node: T | undefined): T | undefined {
  return node && !node.deleted ? node : undefined;
}

function checkParent(path: string, parent: NodeState | undefined): void {
  const p = live(parent);
  if (!p?.directory) {
    const where = parent?.path === "" ? "/" : `/${parent?.path ?? path.slice(0, path.lastIndexOf("/"))}/`;
    throw new NotFoundError(`parent directory ${where} not found`);
  }
}

function checkIfMatch(ifMatch: readonly string[] | undefined, target: NodeState | undefined): void {
  if (ifMatch === undefined) return;
  const t = live(target);
  if (!t) {
    throw new PreconditionFailedError({
      field: "if_match",
      reason: (name) => `${name} given but the resource does not exist`,
    });
  }
  if (!tagMatches(ifMatch, t.tag)) {
    const tag = t.tag;
    throw new PreconditionFailedError({
      field: "if_match",
      reason: (name) => `${name} does not match the current ETag "${tag}"`,
    });
  }
}

/** A file write: returns whether it creates the resource. */
export function planPutFile(
  path: string,
  target: NodeState | undefined,
  parent: NodeState | undefined,
  ifMatch: readonly string[] | undefined,
): { created: boolean } {
  if (path === "") throw new ForbiddenError("the root directory is not a resource");
  checkParent(path, parent);
  if (live(target)?.directory) {
    throw new ForbiddenError(`a directory named /${path}/ exists; a resource cannot take its name`);
  }
  checkIfMatch(ifMatch, target);
  return { created: !live(target) };
}

/** A directory creation: returns whether it creates it (false: it already existed, nothing changes). */
export function planMakeDirectory(
  path: string,
  target: NodeState | undefined,
  parent: NodeState | undefined,
  ifMatch: readonly string[] | undefined,
): { created: boolean } {
  if (path !== "") checkParent(path, parent);
  const t = live(target);
  if (t && !t.directory) throw new ForbiddenError(`a resource named /${path} exists; a directory cannot take its name`);
  checkIfMatch(ifMatch, target);
  return { created: !t };
}

export function planDelete(path: string, target: NodeState | undefined, ifMatch: readonly string[] | undefined): void {
  if (path === "")
    throw new ForbiddenError("the root directory of a store cannot be deleted; delete the store instead");
  if (!target) throw new NotFoundError(`/${path} not found`);
  if (target.deleted) throw new DeletedError(`/${path} is deleted`, target.tag);
  checkIfMatch(ifMatch, target);
}

export function planCreateStore(existing: { deleted: boolean } | undefined, name: string): void {
  if (existing && !existing.deleted) throw new AlreadyExistsError(`store ${name} already exists`);
}

/** Whether a tombstone is past its store's keep-deleted and must be treated as absent. */
export function isExpiredTombstone(
  node: { deleted: boolean; modified: number },
  config: StoreConfig,
  now: number,
): boolean {
  return node.deleted && node.modified + keepDeletedMillis(config) <= now;
}
