// BackupService (proto/trove/admin/v1/backup.proto): the archive of everything the server keeps,
// streamed in chunks (docs/backup.md), and the read-only switch. Both need stores:admin, checked
// before any work.

import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type BackupResponse,
  BackupResponseSchema,
  type BackupService,
  type SetReadOnlyRequest,
  type SetReadOnlyResponse,
  SetReadOnlyResponseSchema,
} from "@trove/sdk/gen/trove/admin/v1/backup_pb.js";
import { callerKey } from "../auth/caller.js";
import { writeArchive } from "../backup/archive.js";
import { backupParts, gathered } from "../backup/backup.js";
import type { StoragePort } from "../storage/port.js";
import { TROVE_VERSION } from "../version.js";
import { requirePermission } from "./access.js";
import { READ_ONLY_RETRY_AFTER, type ReadOnlySwitch } from "./read-only.js";
import { STORE_ADMIN } from "./store-service.js";

/** A message carries about this many bytes of the archive: the tar headers and small parts are gathered. */
const CHUNK = 1024 * 1024;

export interface BackupCoreOptions {
  storage: StoragePort;
  readOnly: ReadOnlySwitch;
  now?: () => number;
}

export class BackupCore implements ServiceImpl<typeof BackupService> {
  private readonly storage: StoragePort;
  private readonly readOnly: ReadOnlySwitch;
  private readonly now: () => number;

  constructor(options: BackupCoreOptions) {
    this.storage = options.storage;
    this.readOnly = options.readOnly;
    this.now = options.now ?? Date.now;
  }

  async *backup(_req: unknown, ctx: HandlerContext): AsyncGenerator<BackupResponse> {
    requirePermission(ctx.values.get(callerKey), STORE_ADMIN);
    const { parts, describe } = backupParts(this.storage);
    const archive = writeArchive(parts, { troveVersion: TROVE_VERSION, created: this.now(), describe });
    for await (const chunk of gathered(archive, CHUNK)) {
      if (ctx.signal.aborted) return;
      yield create(BackupResponseSchema, { chunk });
    }
  }

  async setReadOnly(req: SetReadOnlyRequest, ctx: HandlerContext): Promise<SetReadOnlyResponse> {
    requirePermission(ctx.values.get(callerKey), STORE_ADMIN);
    await this.readOnly.set(req.readOnly, req.retryAfterSeconds || READ_ONLY_RETRY_AFTER);
    return create(SetReadOnlyResponseSchema, { readOnly: this.readOnly.on });
  }
}
