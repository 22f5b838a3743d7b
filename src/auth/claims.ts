// What a verified token's claims allow: its account, permissions, and grants on
// stores, paths and projects (the claim names and shapes are in docs/auth.md).

import { BadRequestError } from "../domain/errors.js";
import { parsePath, validateStoreName } from "../domain/path.js";
import { type Caller, OPERATIONS, type Operation, type Target } from "./caller.js";

/** Claim carrying the resource and project grants. */
export const GRANTS_CLAIM = "trove_grants";
/** Claim naming the caller's account; `account` is read when it is absent. */
export const ACCOUNT_CLAIM = "trove_account";

/** Claims that do not have the documented shape: the token is refused, with this reason. */
export class ClaimError extends Error {
  override name = "ClaimError";
}

export interface StoreGrant {
  /** A store name, or "*" for every store. */
  store: string;
  /** Path prefix in stored form ("" for the whole store): the directory or resource and everything below. */
  path: string;
  ops: ReadonlySet<Operation>;
}

export interface ProjectGrant {
  /** Account and project name of `project://{account}/{name}`; either may be "*". */
  account: string;
  name: string;
  ops: ReadonlySet<Operation>;
}

export interface Grants {
  stores: StoreGrant[];
  projects: ProjectGrant[];
}

const PROJECT_URI = /^project:\/\/([^/\s]+)\/([^/\s]+)$/;

function operations(value: unknown, where: string): Set<Operation> {
  if (!Array.isArray(value) || value.length === 0) {
    throw new ClaimError(`${where}.ops must be a non-empty list of read, write and delete`);
  }
  const ops = new Set<Operation>();
  for (const op of value) {
    if (!OPERATIONS.includes(op as Operation)) {
      throw new ClaimError(`${where}.ops: unknown operation ${JSON.stringify(op)} (read, write or delete)`);
    }
    ops.add(op as Operation);
  }
  return ops;
}

function grantPath(value: unknown, where: string): string {
  if (value === undefined) return "";
  if (typeof value !== "string") throw new ClaimError(`${where}.path must be a string`);
  try {
    return parsePath(value);
  } catch (err) {
    throw new ClaimError(`${where}.path: ${(err as Error).message}`);
  }
}

/** Parses the grants claim: a list, or a JSON text of a list (for issuers that only emit strings). */
export function parseGrants(claim: unknown): Grants {
  const grants: Grants = { stores: [], projects: [] };
  if (claim === undefined) return grants;
  let list = claim;
  if (typeof claim === "string") {
    try {
      list = JSON.parse(claim);
    } catch {
      throw new ClaimError(`${GRANTS_CLAIM} is a string that is not JSON`);
    }
  }
  if (!Array.isArray(list)) throw new ClaimError(`${GRANTS_CLAIM} must be a list of grants`);
  list.forEach((entry: unknown, i) => {
    const where = `${GRANTS_CLAIM}[${i}]`;
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
      throw new ClaimError(`${where} must be an object`);
    }
    const g = entry as Record<string, unknown>;
    const ops = operations(g.ops, where);
    if (typeof g.store === "string" && g.project === undefined) {
      if (g.store !== "*") {
        try {
          validateStoreName(g.store);
        } catch (err) {
          if (err instanceof BadRequestError) throw new ClaimError(`${where}.store: ${err.message}`);
          throw err;
        }
      }
      grants.stores.push({ store: g.store, path: grantPath(g.path, where), ops });
    } else if (typeof g.project === "string" && g.store === undefined) {
      const m = PROJECT_URI.exec(g.project);
      if (!m) throw new ClaimError(`${where}.project must be project://{account}/{project name}`);
      grants.projects.push({ account: m[1] as string, name: m[2] as string, ops });
    } else {
      throw new ClaimError(`${where} needs either a store or a project`);
    }
  });
  return grants;
}

/** Permissions from `scope` (space-separated), `scp` (text or list) and `permissions` (list). */
export function parsePermissions(claims: Record<string, unknown>): Set<string> {
  const out = new Set<string>();
  const words = (value: unknown, name: string) => {
    if (value === undefined) return;
    if (typeof value === "string") {
      for (const w of value.split(" ")) if (w !== "") out.add(w);
    } else if (Array.isArray(value) && value.every((v) => typeof v === "string")) {
      for (const w of value) out.add(w);
    } else {
      throw new ClaimError(`${name} must be a space-separated text or a list of texts`);
    }
  };
  words(claims.scope, "scope");
  words(claims.scp, "scp");
  if (claims.permissions !== undefined && !Array.isArray(claims.permissions)) {
    throw new ClaimError("permissions must be a list of texts");
  }
  words(claims.permissions, "permissions");
  return out;
}

/** Whether a grant's path covers a path: the same node, or one below it. */
function covers(prefix: string, path: string): boolean {
  return prefix === "" || path === prefix || (path.startsWith(prefix) && path.charCodeAt(prefix.length) === 47);
}

/** Whether a path is a directory on the way to a grant's path (the root included). */
function leadsTo(path: string, prefix: string): boolean {
  return prefix !== "" && (path === "" || (prefix.startsWith(path) && prefix.charCodeAt(path.length) === 47));
}

export class TokenCaller implements Caller {
  constructor(
    readonly subject: string,
    readonly account: string,
    readonly permissions: ReadonlySet<string>,
    readonly grants: Grants,
  ) {}

  may(operation: Operation, target: Target): boolean {
    const { store, path } = target;
    for (const g of this.grants.stores) {
      if ((g.store !== store && g.store !== "*") || !g.ops.has(operation)) continue;
      if (covers(g.path, path)) return true;
      // Reading the directories on the way to a read grant lets a caller list down to it; their
      // other entries stay hidden, because listings and the feed show only what this allows.
      // A file sitting where such a directory would be is not on the way: it is not covered.
      if (operation === "read" && target.directory !== false && leadsTo(path, g.path)) return true;
    }
    return false;
  }

  holds(permission: string): boolean {
    return this.permissions.has(permission);
  }

  mayProject(operation: Operation, account: string, project: string): boolean {
    return this.grants.projects.some(
      (g) =>
        g.ops.has(operation) && (g.account === "*" || g.account === account) && (g.name === "*" || g.name === project),
    );
  }
}

/** The caller a verified token's claims describe; throws ClaimError for claims of the wrong shape. */
export function callerFromClaims(claims: Record<string, unknown>): TokenCaller {
  const text = (name: string): string | undefined => {
    const v = claims[name];
    if (v === undefined) return undefined;
    if (typeof v !== "string") throw new ClaimError(`${name} must be a string`);
    return v;
  };
  const subject = text("sub") ?? text("client_id") ?? "unknown";
  const account = text(ACCOUNT_CLAIM) ?? text("account") ?? "";
  return new TokenCaller(subject, account, parsePermissions(claims), parseGrants(claims[GRANTS_CLAIM]));
}
