// The cores every face translates to (DESIGN.md, "Shape"): resources, stores, the change feed,
// projects and reports, and this instance's report worker. Built once per server.

import type { Logger } from "pino";
import { BackupCore } from "../services/backup-service.js";
import { ChangeNotifier } from "../services/change-notifier.js";
import { ChangeCore } from "../services/change-service.js";
import { ProjectCore } from "../services/project-service.js";
import { ReadOnlySwitch, readOnlyStorage } from "../services/read-only.js";
import { ReportNotifier } from "../services/report-notifier.js";
import { ReportCore } from "../services/report-service.js";
import { ReportWorker, type ReportWorkerOptions } from "../services/report-worker.js";
import { ResourceCore } from "../services/resource-service.js";
import { StoreCore } from "../services/store-service.js";
import type { PeerChannel, StoragePort } from "../storage/port.js";

export const DEFAULT_MAX_RESOURCE_SIZE = 4 * 1024 ** 3;

export interface CoreOptions {
  storage: StoragePort;
  logger: Logger;
  now: () => number;
  maxResourceSize: number;
  pollWait?: number;
  reportAvailability?: number;
  /** The other workers of `trove serve --workers`: report changes and jobs are told to them. */
  peers?: PeerChannel;
  /** The read-only switch, when it is shared with the other workers (server/workers.ts); default this process's own. */
  readOnly?: ReadOnlySwitch;
  reportWorker?:
    | Partial<Omit<ReportWorkerOptions, "storage" | "notifier" | "availabilityMs" | "now" | "logger">>
    | false;
}

export interface Cores {
  readonly resources: ResourceCore;
  readonly stores: StoreCore;
  /** Armed long-poll and watch waiters. */
  readonly notifier: ChangeNotifier;
  readonly changes: ChangeCore;
  readonly projects: ProjectCore;
  /** Report status watchers. */
  readonly reportNotifier: ReportNotifier;
  readonly reports: ReportCore;
  /** This instance's report worker; undefined when another instance generates the reports. */
  readonly worker: ReportWorker | undefined;
  /** Backups and the read-only switch (docs/backup.md, docs/operations.md). */
  readonly backup: BackupCore;
  readonly readOnly: ReadOnlySwitch;
}

export function createCores(options: CoreOptions): Cores {
  const { now, logger } = options;
  // Every client write goes through the switch (services/read-only.ts); the backup reads past it.
  const readOnly = options.readOnly ?? new ReadOnlySwitch();
  const storage = readOnlyStorage(options.storage, readOnly);
  const backup = new BackupCore({ storage: options.storage, readOnly, now });
  const resources = new ResourceCore({ storage, maxResourceSize: options.maxResourceSize, now });
  const stores = new StoreCore({ storage, now });
  const notifier = new ChangeNotifier(storage);
  const changes = new ChangeCore({ storage, notifier, pollWait: options.pollWait });
  const projects = new ProjectCore({ storage, resources, now });
  const reportNotifier = new ReportNotifier(options.peers);
  const reports = new ReportCore({
    storage,
    projects,
    notifier: reportNotifier,
    availabilityMs: options.reportAvailability,
    now,
  });
  const worker =
    options.reportWorker === false
      ? undefined
      : new ReportWorker({
          ...options.reportWorker,
          storage,
          notifier: reportNotifier,
          availabilityMs: reports.availabilityMs,
          now,
          logger,
        });
  return { resources, stores, notifier, changes, projects, reportNotifier, reports, worker, backup, readOnly };
}
