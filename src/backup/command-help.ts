// What `trove backup` and the archive form of `trove restore` say and take (help, options,
// summary), apart from their implementation (commands.ts), which loads the storage adapters:
// `trove --help` and the client commands start without it.

import type { HostCommand } from "@trove/sdk/cli";

export const BACKUP_HELP = `Usage: trove backup --url URL --output FILE [--token TOKEN] [-q]
       trove backup --data DIR --output FILE [--include-secrets] [-q]
       trove backup --mongodb-url URL [--mongodb-database NAME] --output FILE [-q]
       trove backup verify FILE
       trove backup status FILE [--json]
       trove backup read-only on|off --url URL [--retry-after SECONDS] [--token TOKEN]

Writes one archive (docs/backup.md) of everything the storage holds: every store as of its own
snapshot event id, writes going on meanwhile, with its nodes, versions and contents; projects,
environments, promotions and reports. --url asks a running server for it (BackupService.Backup,
which needs the permission stores:admin; the token as for the client commands: --token,
TROVE_TOKEN, the config file, or a local server's development issuer). --data reads a stopped embedded server's data directory
(a running server holds it: exit 1); --mongodb-url reads a MongoDB database, also while servers
use it. Progress with bytes and ETA goes to stderr on a terminal; -q silences it.

verify reads an archive and checks every part's checksum and the manifest: "ok" and exit 0, or
the reason naming the part and exit 1. status prints what the manifest says: creation time,
Trove version, format, size, counts and each store's snapshot event id.

read-only on makes a running server refuse every write (503 with Retry-After on REST,
UNAVAILABLE on gRPC) until read-only off (docs/operations.md, "Read-only switch").

Options:
      --url URL               a running server (the archive streams from it)
      --token TOKEN           the bearer token for --url (else as the client commands find one)
      --retry-after SECONDS   read-only on: what refused writers are told to wait (default 30)
      --data DIR              the embedded server's data directory (the server stopped)
      --mongodb-url URL       a MongoDB deployment (as trove serve --mongodb-url)
      --mongodb-database NAME its database (default trove)
  -o, --output FILE           where the archive goes ("-": stdout)
      --include-secrets       add the development issuer's key file (left out by default)
  -q, --quiet                 no progress on stderr
      --json                  status: the manifest's contents as JSON
`;

export const RESTORE_ARCHIVE_HELP = `Usage: trove restore FILE --data DIR [-q]
       trove restore FILE --mongodb-url URL [--mongodb-database NAME] [-q]

Restores a backup archive (docs/backup.md) into an empty embedded data directory or MongoDB
database, checking the archive as it reads it. A target that holds anything is refused (exit 8)
and left alone. A restore that fails (a damaged archive: exit 1, naming the part) leaves the
target marked as being restored, which trove serve refuses to start on; running the same
restore again finishes the job.

`;

export const STORAGE_OPTIONS = {
  data: { type: "string" },
  "mongodb-url": { type: "string" },
  "mongodb-database": { type: "string" },
  quiet: { type: "boolean", short: "q" },
  help: { type: "boolean", short: "h" },
} as const;

export const BACKUP_OPTIONS = {
  ...STORAGE_OPTIONS,
  url: { type: "string" },
  token: { type: "string" },
  "retry-after": { type: "string" },
  output: { type: "string", short: "o" },
  "include-secrets": { type: "boolean" },
  json: { type: "boolean" },
} as const;

export const BACKUP_COMMAND: Omit<HostCommand, "run"> = {
  summary: `${"write a backup archive".padEnd(37)}trove backup --url URL -o backup.tar`,
  help: BACKUP_HELP,
  options: BACKUP_OPTIONS,
};

export const RESTORE_COMMAND: Omit<HostCommand, "run"> = {
  summary: `${"restore an archive (or history)".padEnd(37)}trove restore backup.tar --data DIR`,
  help: RESTORE_ARCHIVE_HELP,
  options: { ...STORAGE_OPTIONS, version: { type: "string" }, "as-of": { type: "string" } },
};
