// `trove backup` and the archive form of `trove restore` (docs/backup.md, docs/cli.md): the
// server package's commands that open a storage themselves (a stopped embedded server's data
// directory, or a MongoDB database) and stream an archive to or from a file.

import { closeSync, createReadStream, openSync, writeSync } from "node:fs";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  bytes,
  type CliIo,
  createProgress,
  EXIT,
  resolveConfig,
  run,
  tokenProviderOf,
  UsageError,
} from "@trove/sdk/cli";
import { BackupService } from "@trove/sdk/gen/trove/admin/v1/backup_pb.js";
import { DEV_ISSUER_FILE } from "../auth/dev-issuer.js";
import { InsufficientStorageError, UnavailableError } from "../domain/errors.js";
import { isDataDirError } from "../server/data-dir.js";
import type { StoragePort } from "../storage/port.js";
import { TROVE_VERSION } from "../version.js";
import { ArchiveReader, isArchiveError, type Manifest, writeArchive } from "./archive.js";
import { type BackupContents, backupParts, gathered, jsonPart } from "./backup.js";
import { BACKUP_HELP, BACKUP_OPTIONS, RESTORE_ARCHIVE_HELP, STORAGE_OPTIONS } from "./command-help.js";
import { RestoreRefusedError, restoreArchive } from "./restore.js";

/** The arguments as parseArgs reads them; its complaints are usage errors (exit 2). */
function usage<T>(parsing: () => T): T {
  try {
    return parsing();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

interface Target {
  data?: string;
  mongodbUrl?: string;
  mongodbDatabase?: string;
}

function targetOf(values: Record<string, unknown>, command: string): Target {
  const data = values.data as string | undefined;
  const mongodbUrl = values["mongodb-url"] as string | undefined;
  if ((data === undefined) === (mongodbUrl === undefined)) {
    throw new UsageError(`trove ${command}: give one of --data DIR and --mongodb-url URL`);
  }
  if (values["mongodb-database"] !== undefined && mongodbUrl === undefined) {
    throw new UsageError(`trove ${command}: --mongodb-database goes with --mongodb-url`);
  }
  return { data, mongodbUrl, mongodbDatabase: values["mongodb-database"] as string | undefined };
}

/** Opens the backend named; only its adapter's modules load (the MongoDB driver alone is a tenth of a second). */
async function openTarget(target: Target): Promise<StoragePort> {
  if (target.mongodbUrl !== undefined) {
    const { MongoStorage } = await import("../storage/mongodb/mongo-storage.js");
    return MongoStorage.open({ url: target.mongodbUrl, database: target.mongodbDatabase });
  }
  const { SqliteStorage } = await import("../storage/sqlite/sqlite-storage.js");
  return SqliteStorage.open({ dataDir: target.data as string });
}

/** The exit code and message of a failure of these commands (docs/cli.md, Exit codes). */
function failure(command: string, err: unknown, io: CliIo): number {
  if (isArchiveError(err)) {
    io.stderr.write(`trove ${command}: ${err.message}\n`);
    return EXIT.error;
  }
  if (err instanceof RestoreRefusedError) {
    io.stderr.write(`trove ${command}: ${err.message}\n`);
    return EXIT.conflict;
  }
  if (err instanceof UnavailableError) {
    const again =
      command === "restore"
        ? "; the target stays marked as being restored: run the same trove restore again once it is back"
        : "";
    io.stderr.write(`trove ${command}: ${err.message}${again}\n`);
    return EXIT.unavailable;
  }
  if (err instanceof InsufficientStorageError) {
    // A full disk under the data directory (ENOSPC), or a full MongoDB: what was written stays,
    // marked as an unfinished restore.
    const again = command === "restore" ? "; make room and run the same trove restore again to finish it" : "";
    io.stderr.write(`trove ${command}: no space left on the target: ${err.message}${again}\n`);
    return EXIT.error;
  }
  if (isDataDirError(err)) {
    io.stderr.write(`trove ${command}: ${err.message}\n`);
    return EXIT.error;
  }
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOENT") {
    io.stderr.write(`trove ${command}: ${(err as Error).message}\n`);
    return EXIT.notFound;
  }
  if (code !== undefined || /in use by another process/.test((err as Error).message)) {
    io.stderr.write(`trove ${command}: ${(err as Error).message}\n`);
    return EXIT.error;
  }
  throw err;
}

/** The total size of the files under a directory: the ETA's guess of an archive's size. */
async function sizeOf(dir: string): Promise<number> {
  let total = 0;
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => [])) {
    if (e.isFile()) total += (await stat(join(e.parentPath, e.name)).catch(() => ({ size: 0 }))).size;
  }
  return total;
}

async function* fileChunks(file: string): AsyncIterable<Uint8Array> {
  yield* createReadStream(file, { highWaterMark: 1024 * 1024 }) as AsyncIterable<Buffer>;
}

async function readArchiveFile(file: string): Promise<{ manifest: Manifest<BackupContents>; size: number }> {
  const { size } = await stat(file);
  const reader = new ArchiveReader<BackupContents>(fileChunks(file));
  for await (const _ of reader.parts()) {
    // every part is checked by the reader
  }
  return { manifest: reader.manifest as Manifest<BackupContents>, size };
}

function statusText(file: string, manifest: Manifest<BackupContents>, size: number): string {
  const c = manifest.contents.counts;
  const lines = [
    `archive:   ${file}`,
    `created:   ${new Date(manifest.created).toISOString()}`,
    `trove:     ${manifest.troveVersion} (backup format ${manifest.format})`,
    `size:      ${size} bytes (${bytes(size)})`,
    `stores:    ${c.stores}`,
    `nodes:     ${c.nodes}`,
    `versions:  ${c.versions}`,
    `blobs:     ${c.blobs} (${c.blobBytes} bytes)`,
    `projects:  ${c.projects}, environments: ${c.environments}, promotions: ${c.promotions}, reports: ${c.reports}`,
    `secrets:   ${manifest.contents.secrets ? "included" : "none"}`,
    ...manifest.contents.stores.map(
      (s) => `store ${s.name}: snapshot event ${s.snapshotEventId}, ${s.nodes} nodes, ${s.versions} versions`,
    ),
  ];
  return `${lines.join("\n")}\n`;
}

/** The BackupService client of a running server, with the caller's token on every call. */
async function backupClient(values: Record<string, unknown>, io: CliIo) {
  const config = await resolveConfig({ url: values.url, token: values.token }, io.env);
  const tokens = await tokenProviderOf(config);
  const transport = createConnectTransport({ baseUrl: config.url, httpVersion: "1.1" });
  const client = createClient(BackupService, transport);
  const headers = async () => (tokens ? { authorization: `Bearer ${await tokens.getToken()}` } : undefined);
  return { client, headers };
}

/** The exit code of a failed call to a server (docs/cli.md, Exit codes). */
function rpcFailure(command: string, err: unknown, io: CliIo): number {
  const e = ConnectError.from(err);
  io.stderr.write(`trove ${command}: ${e.rawMessage}\n`);
  if (e.code === Code.PermissionDenied || e.code === Code.Unauthenticated) return EXIT.unauthorized;
  if (e.code === Code.Unavailable) return EXIT.unavailable;
  return EXIT.error;
}

async function backupFromServer(values: Record<string, unknown>, io: CliIo): Promise<number> {
  const output = values.output as string | undefined;
  if (output === undefined) throw new UsageError("trove backup: --output FILE is required");
  const { client, headers } = await backupClient(values, io);
  const messages = client.backup({}, { headers: await headers() });
  let written: number;
  try {
    written = await writeOutput(
      (async function* () {
        for await (const message of messages) yield message.chunk;
      })(),
      output,
      io,
      !values.quiet,
    );
  } catch (err) {
    return rpcFailure("backup", err, io);
  }
  if (!values.quiet) io.stderr.write(`trove backup: ${output}: ${written} bytes\n`);
  return EXIT.ok;
}

/**
 * Writes an archive's chunks to FILE ("-": stdout), the file made only once the first chunk comes
 * (a refused backup leaves none), with progress on stderr; resolves with the bytes written.
 */
async function writeOutput(
  chunks: AsyncIterable<Uint8Array>,
  output: string,
  io: CliIo,
  showProgress: boolean,
  expected?: number,
): Promise<number> {
  const progress = createProgress("backup", { stream: io.stderr, enabled: showProgress });
  // A file is written in place, each chunk at once: nothing else runs in this process meanwhile,
  // and a write handed to the thread pool waited for a thread as long as it took on a loaded
  // machine (docs/benchmarks.md, "Backup and restore").
  let fd: number | undefined;
  let written = 0;
  try {
    for await (const chunk of chunks) {
      if (output === "-") {
        if (!io.stdout.write(chunk)) await new Promise((r) => io.stdout.once("drain", r));
      } else {
        fd ??= openSync(output, "w", 0o600);
        for (let at = 0; at < chunk.byteLength; ) at += writeSync(fd, chunk, at);
      }
      written += chunk.byteLength;
      progress.update(written, expected && Math.max(expected, written));
    }
  } finally {
    progress.finish();
    if (fd !== undefined) closeSync(fd);
  }
  return written;
}

async function readOnly(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = usage(() => parseArgs({ args, options: BACKUP_OPTIONS, allowPositionals: true }));
  const [state, ...extra] = positionals;
  if ((state !== "on" && state !== "off") || extra.length > 0) {
    throw new UsageError("trove backup read-only: say on or off");
  }
  const retryAfter = values["retry-after"] === undefined ? 0 : Number(values["retry-after"]);
  if (!Number.isInteger(retryAfter) || retryAfter < 0) {
    throw new UsageError("trove backup read-only: --retry-after takes a whole number of seconds");
  }
  const { client, headers } = await backupClient(values, io);
  try {
    const r = await client.setReadOnly(
      { readOnly: state === "on", retryAfterSeconds: retryAfter },
      { headers: await headers() },
    );
    io.stdout.write(`read-only ${r.readOnly ? "on" : "off"}\n`);
    return EXIT.ok;
  } catch (err) {
    return rpcFailure("backup read-only", err, io);
  }
}

export async function backup(args: string[], io: CliIo): Promise<number> {
  const [sub, file, ...rest] = args;
  if (sub === "read-only") return readOnly(args.slice(1), io);
  if (sub === "verify" || sub === "status") {
    const { values, positionals } = usage(() =>
      parseArgs({
        args: [file ?? "", ...rest].filter((a) => a !== ""),
        options: { json: { type: "boolean" } },
        allowPositionals: true,
      }),
    );
    const path = positionals[0];
    if (path === undefined || positionals.length > 1) throw new UsageError(`trove backup ${sub}: give one FILE`);
    try {
      const { manifest, size } = await readArchiveFile(path);
      if (sub === "verify") io.stdout.write(`ok: ${path}: ${manifest.parts.length} parts, ${size} bytes\n`);
      else if (values.json) io.stdout.write(`${JSON.stringify({ ...manifest, parts: undefined, size }, null, 2)}\n`);
      else io.stdout.write(statusText(path, manifest, size));
      return EXIT.ok;
    } catch (err) {
      return failure(`backup ${sub}`, err, io);
    }
  }
  const { values, positionals } = usage(() => parseArgs({ args, options: BACKUP_OPTIONS, allowPositionals: true }));
  if (values.help) {
    io.stdout.write(BACKUP_HELP);
    return EXIT.ok;
  }
  if (positionals.length > 0) throw new UsageError(`trove backup: unexpected ${positionals[0]}`);
  if (values.url !== undefined) {
    if (values.data !== undefined || values["mongodb-url"] !== undefined) {
      throw new UsageError("trove backup: --url goes without --data and --mongodb-url");
    }
    return backupFromServer(values, io);
  }
  const output = values.output;
  if (output === undefined) throw new UsageError("trove backup: --output FILE is required");
  const target = targetOf(values, "backup");
  if (values["include-secrets"] && target.data === undefined) {
    throw new UsageError("trove backup: --include-secrets goes with --data (the key file is in the data directory)");
  }
  let storage: StoragePort;
  try {
    storage = await openTarget(target);
  } catch (err) {
    return failure("backup", err, io);
  }
  try {
    const secrets = [];
    if (values["include-secrets"]) {
      const key = await readFile(join(target.data as string, DEV_ISSUER_FILE)).catch(() => undefined);
      if (key) secrets.push(jsonPart(`secrets/${DEV_ISSUER_FILE}`, JSON.parse(key.toString("utf8"))));
    }
    const expected = target.data !== undefined ? await sizeOf(target.data) : undefined;
    const { parts, describe } = backupParts(storage, { secrets });
    const archive = writeArchive(parts, { troveVersion: TROVE_VERSION, created: Date.now(), describe });
    const written = await writeOutput(gathered(archive, 256 * 1024), output, io, !values.quiet, expected);
    const c = describe().counts;
    if (!values.quiet) {
      io.stderr.write(
        `trove backup: ${output}: ${written} bytes, ${c.stores} stores, ${c.nodes} nodes, ${c.versions} versions, ${c.blobs} blobs\n`,
      );
    }
    return EXIT.ok;
  } catch (err) {
    return failure("backup", err, io);
  } finally {
    await storage.close();
  }
}

async function restoreFromArchive(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = usage(() => parseArgs({ args, options: STORAGE_OPTIONS, allowPositionals: true }));
  const file = positionals[0];
  if (file === undefined || positionals.length > 1) throw new UsageError("trove restore: give one archive FILE");
  const target = targetOf(values, "restore");
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch (err) {
    return failure("restore", err, io);
  }
  let storage: StoragePort;
  try {
    storage = await openTarget(target);
  } catch (err) {
    return failure("restore", err, io);
  }
  try {
    const progress = createProgress("restore", { stream: io.stderr, enabled: !values.quiet });
    const manifest = await restoreArchive(storage, fileChunks(file), {
      progress: (read) => progress.update(read, size),
      secret: async (name, body) => {
        if (target.data !== undefined && name === `secrets/${DEV_ISSUER_FILE}`) {
          await writeFile(join(target.data, DEV_ISSUER_FILE), body, { mode: 0o600 });
        }
      },
    });
    progress.finish();
    const c = manifest.contents.counts;
    if (!values.quiet) {
      io.stderr.write(
        `trove restore: ${file}: ${c.stores} stores, ${c.nodes} nodes, ${c.versions} versions, ${c.blobs} blobs, ${c.projects} projects, ${c.reports} reports restored\n`,
      );
    }
    return EXIT.ok;
  } catch (err) {
    return failure("restore", err, io);
  } finally {
    await storage.close();
  }
}

/**
 * `trove restore`: with --data or --mongodb-url, the restore of an archive; otherwise the client
 * command of history (a version, a moment: docs/history.md), which it hands on.
 */
export async function restore(args: string[], io: CliIo): Promise<number> {
  const archive = args.some((a) => /^--(data|mongodb-url|mongodb-database)(=|$)/.test(a));
  if (archive) return restoreFromArchive(args, io);
  if (args.includes("--help") || args.includes("-h")) io.stdout.write(RESTORE_ARCHIVE_HELP);
  return run(["restore", ...args], io);
}
