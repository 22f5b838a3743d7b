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

/**
 * RFC 9110's If-None-Match on a write: "*" refuses when anything lives at the path (a resource or
 * a directory; a tombstone does not count, as a deleted resource does not exist), a tag list when
 * the live node's tag is one of them. The conditional create: checked where the write is decided,
 * so of two concurrent creates exactly one succeeds.
 */
function checkIfNoneMatch(
  path: string,
  ifNoneMatch: readonly string[] | undefined,
  target: NodeState | undefined,
): void {
  const t = live(target);
  if (ifNoneMatch === undefined || !t || !tagMatches(ifNoneMatch, t.tag)) return;
  const what = t.directory ? `a directory /${path}/` : `/${path}`;
  const tag = t.tag;
  throw new PreconditionFailedError({
    field: "if_none_match",
    reason: (name) =>
      ifNoneMatch.includes("*")
        ? `${name} * given but ${what} exists (current ETag "${tag}")`
        : `${name} matches the current ETag "${tag}" of ${what}`,
  });
}

/** The entity-tag conditions of a write (undefined or absent: none given). */
export interface TagConditions {
  /** Tags of which the stored one must be one ("*": any existing resource). */
  ifMatch?: readonly string[] | undefined;
  /** Tags of which the stored one must not be one ("*": nothing may exist; tombstones do not). */
  ifNoneMatch?: readonly string[] | undefined;
}

/** A file write: returns whether it creates the resource. */
export function planPutFile(
  path: string,
  target: NodeState | undefined,
  parent: NodeState | undefined,
  conditions: TagConditions,
): { created: boolean } {
  if (path === "") throw new ForbiddenError("the root directory is not a resource");
  checkParent(path, parent);
  // Before the method's own refusals (RFC 9110, 13.2.2): whatever exists there fails the create.
  checkIfNoneMatch(path, conditions.ifNoneMatch, target);
  if (live(target)?.directory) {
    throw new ForbiddenError(`a directory named /${path}/ exists; a resource cannot take its name`);
  }
  checkIfMatch(conditions.ifMatch, target);
  return { created: !live(target) };
}

/** A directory creation: returns whether it creates it (false: it already existed, nothing changes). */
export function planMakeDirectory(
  path: string,
  target: NodeState | undefined,
  parent: NodeState | undefined,
  conditions: TagConditions,
): { created: boolean } {
  if (path !== "") checkParent(path, parent);
  checkIfNoneMatch(path, conditions.ifNoneMatch, target);
  const t = live(target);
  if (t && !t.directory) throw new ForbiddenError(`a resource named /${path} exists; a directory cannot take its name`);
  checkIfMatch(conditions.ifMatch, target);
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
