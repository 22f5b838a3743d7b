// Store configuration rules: types, the features they give, and settings.

import { isAbsolute, normalize } from "node:path";
import { BadRequestError } from "./errors.js";
import { validateStoreName } from "./path.js";

/** `filesystem`: the resources are the files of a folder (docs/filesystem-stores.md). */
export type StoreType = "recursive" | "snapshot" | "filesystem";
export const STORE_TYPES: readonly StoreType[] = ["recursive", "snapshot", "filesystem"];

export function featuresOf(type: StoreType): string[] {
  return hasRecursiveTags(type) ? ["sync", "sync-recursive"] : ["sync", "sync-snapshot"];
}

/** Whether a change gives every ancestor directory a new tag (sync-recursive): all types but snapshot. */
export function hasRecursiveTags(type: StoreType): boolean {
  return type !== "snapshot";
}

/** A filesystem store's own settings: where its folder is, and where uploads are assembled. */
export const FILESYSTEM_SETTINGS = ["filesystem-location", "filesystem-temp"] as const;

/** Settings a client may set; every other setting in a listing is reported by the server. */
export const WRITABLE_SETTINGS = ["keep-deleted", "keep-versions"] as const;
export const DEFAULT_KEEP_DELETED = "7d";
/**
 * keep-versions of a store created from now on (docs/history.md); a store created before history
 * existed has none, read as 0 (history off) until it is given one.
 */
export const DEFAULT_KEEP_VERSIONS = "30d";

/**
 * Settings that describe the deployment; listed, never changed per store. A filesystem store
 * has filesystem-location and filesystem-temp of its own instead (FILESYSTEM_SETTINGS).
 */
export const REPORTED_SETTINGS = [
  "filesystem-location",
  "filesystem-temp",
  "database-lock-timeout",
  "database-transaction-retries",
  "database-connection-pool-size",
  "database-driver",
  "database-dialect",
  "database-connection-url",
  "database-username",
  "database-password",
] as const;

export interface StoreConfig {
  name: string;
  type: StoreType;
  /** Writable settings only, by name. */
  settings: Record<string, string>;
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses a duration: a number of seconds, or a number followed by ms, s, m, h or d. */
export function parseDuration(text: string): number {
  const m = /^(\d{1,12})(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) {
    throw new BadRequestError(
      `invalid duration ${JSON.stringify(text)}: use a whole number of seconds or a number with ms, s, m, h or d (e.g. 7d)`,
    );
  }
  return Number(m[1]) * (UNITS[m[2] ?? "s"] ?? 1000);
}

// keep-deleted in milliseconds by its exact text: every read of a path needs it (is a tombstone
// expired?), and a parse is a pure function of the text, so an entry is never stale: a setting
// changed by any instance is a different text, parsed on first sight. No I/O; bounded.
const keepDeletedByText = new Map<string, number>();

export function keepDeletedMillis(config: StoreConfig): number {
  const text = config.settings["keep-deleted"] ?? DEFAULT_KEEP_DELETED;
  let millis = keepDeletedByText.get(text);
  if (millis === undefined) {
    millis = parseDuration(text);
    if (keepDeletedByText.size >= 1000) keepDeletedByText.clear();
    keepDeletedByText.set(text, millis);
  }
  return millis;
}

const keepVersionsByText = new Map<string, number>();

/** How long a replaced state is kept (docs/history.md); 0 when history is off (also: no setting). */
export function keepVersionsMillis(config: StoreConfig): number {
  const text = config.settings["keep-versions"];
  if (text === undefined) return 0;
  let millis = keepVersionsByText.get(text);
  if (millis === undefined) {
    millis = parseDuration(text);
    if (keepVersionsByText.size >= 1000) keepVersionsByText.clear();
    keepVersionsByText.set(text, millis);
  }
  return millis;
}

/** Whether a write to this store keeps the state it replaces. */
export function keepsVersions(config: StoreConfig): boolean {
  return keepVersionsMillis(config) > 0;
}

/**
 * The configuration a write sees while a backup holds the store (docs/backup.md, "Consistency"):
 * the same, but keeping the states it replaces, so the snapshot's states stay readable.
 */
export function heldForSnapshot(config: StoreConfig): StoreConfig {
  if (keepsVersions(config)) return config;
  return { ...config, settings: { ...config.settings, "keep-versions": SNAPSHOT_KEEP_VERSIONS } };
}

/** keep-versions while held: any value above 0 (the purge, which reads the stored one, skips held stores). */
const SNAPSHOT_KEEP_VERSIONS = "1d";

export interface StoreInput {
  name: string;
  type?: string;
  settings?: ReadonlyArray<{ name: string; value: string }>;
}

/**
 * Validates a store configuration as given by a client and merges it over the
 * current one (for an update). Reported settings are accepted only unchanged
 * (a client may send back a listing it read), never with a new value. A filesystem store needs
 * filesystem-location (an absolute path, fixed once the store exists) and may set
 * filesystem-temp; whether they name usable directories is the storage's check (I/O).
 */
export function resolveStoreConfig(
  input: StoreInput,
  current: StoreConfig | undefined,
  reported: Readonly<Record<string, string>>,
): StoreConfig {
  const name = validateStoreName(input.name);
  let type: StoreType = current?.type ?? "recursive";
  if (input.type !== undefined && input.type !== "") {
    if (!STORE_TYPES.includes(input.type as StoreType)) {
      throw new BadRequestError(
        `unknown store type ${JSON.stringify(input.type)}: use one of ${STORE_TYPES.join(", ")}`,
      );
    }
    type = input.type as StoreType;
  }
  if (current && (current.type === "filesystem") !== (type === "filesystem")) {
    throw new BadRequestError(
      `store ${name} is of type ${current.type} and cannot become ${type}: delete it and create it again`,
    );
  }
  const filesystem = type === "filesystem";
  const settings: Record<string, string> = {
    ...(current?.settings ?? { "keep-deleted": DEFAULT_KEEP_DELETED, "keep-versions": DEFAULT_KEEP_VERSIONS }),
  };
  const seen = new Set<string>();
  for (const { name: key, value } of input.settings ?? []) {
    if (seen.has(key)) throw new BadRequestError(`setting ${JSON.stringify(key)} given twice`);
    seen.add(key);
    if ((WRITABLE_SETTINGS as readonly string[]).includes(key)) {
      parseDuration(value);
      settings[key] = value.trim();
    } else if (filesystem && (FILESYSTEM_SETTINGS as readonly string[]).includes(key)) {
      const dir = directoryPath(key, value);
      if (key === "filesystem-location" && current && current.settings[key] !== dir) {
        throw new BadRequestError(
          `the filesystem-location of store ${name} cannot be changed: delete the store and create another one`,
        );
      }
      settings[key] = dir;
    } else if ((REPORTED_SETTINGS as readonly string[]).includes(key)) {
      if (reported[key] !== undefined && reported[key] !== value) {
        throw new BadRequestError(`setting ${JSON.stringify(key)} is managed by the server and cannot be changed`);
      }
    } else {
      throw new BadRequestError(`unknown setting ${JSON.stringify(key)}`);
    }
  }
  // History of a filesystem store keeps a copy of every state's bytes beside its folder, which
  // doubles its disk: off unless asked for (docs/history.md, "Filesystem stores").
  if (filesystem && !current && !seen.has("keep-versions")) settings["keep-versions"] = "0";
  if (filesystem && !settings["filesystem-location"]) {
    throw new BadRequestError(
      "a filesystem store needs the setting filesystem-location: the absolute path of an existing directory",
    );
  }
  return { name, type, settings };
}

/** A directory setting in its stored form: absolute, normalized, without a trailing slash. */
function directoryPath(key: string, value: string): string {
  if (value === "" || !isAbsolute(value) || value.includes("\0")) {
    throw new BadRequestError(`${key} must be the absolute path of a directory, not ${JSON.stringify(value)}`);
  }
  const dir = normalize(value);
  return dir.length > 1 && dir.endsWith("/") ? dir.slice(0, -1) : dir;
}
