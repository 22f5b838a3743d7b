// Browse: one directory of a store, with breadcrumbs and the folder tree; sortable columns and
// deleted entries on demand; view, download, upload (files and folders, by drop or picker, with
// progress), new folder, delete with a count of what goes. The directory follows the store's
// change feed (WatchChanges) and relists when it changes or after a reset.

import { Code, ConnectError } from "@connectrpc/connect";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Resource, RestoreResponse } from "../../../sdk/src/gen/trove/resources/v2/resources_pb.js";
import { ConfirmButtons, Dialog, errorText } from "../components/dialog.js";
import { ErrorLine } from "../components/error-line.js";
import { type FeedEntry, FeedPanel, LiveBadge } from "../components/feed.js";
import { HistoryDialog } from "../components/history.js";
import { Listing } from "../components/listing.js";
import { FolderTree } from "../components/tree.js";
import { Viewer } from "../components/viewer.js";
import { readResource, saveAs } from "../content.js";
import { useApp } from "../context.js";
import { overwriteSeen, type Seen } from "../lib/conflict.js";
import { formatTime } from "../lib/format.js";
import {
  asOfHref,
  asOfOf,
  breadcrumbs,
  browseHref,
  joinPath,
  momentOfLocal,
  nameProblem,
  parentPath,
} from "../lib/paths.js";
import { nextSort, type Sort, sortListing } from "../lib/sort.js";
import { followStore, type LiveState } from "../live.js";
import { droppedFiles, type PickedFile, pickedFiles, putResource } from "../upload.js";
import type { ScreenProps } from "./registry.js";

interface Upload {
  id: number;
  path: string;
  size: number;
  sent: number;
  state: "waiting" | "sending" | "done" | "conflict" | "failed";
  message?: string;
  file: File;
}

const MAX_FEED = 200;
let uploadIds = 0;

export function BrowseScreen({ params, search }: ScreenProps) {
  const store = params.store as string;
  const path = params.path ?? "";
  // A moment (docs/history.md): the directory as it was then, read-only.
  const asOf = asOfOf(search);
  const { clients, session, navigate } = useApp();
  const [history, setHistory] = useState<string>();
  const [restoringFolder, setRestoringFolder] = useState(false);
  const [entries, setEntries] = useState<Resource[]>();
  const [error, setError] = useState<string>();
  const [showDeleted, setShowDeleted] = useState(false);
  const [sort, setSort] = useState<Sort>({ key: "name", direction: "asc" });
  const [viewing, setViewing] = useState<Resource>();
  const [deleting, setDeleting] = useState<Resource>();
  const [making, setMaking] = useState(false);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [status, setStatus] = useState("");
  const [live, setLive] = useState<{ state: LiveState; reason?: string }>({ state: "connecting" });
  const [feed, setFeed] = useState<FeedEntry[]>([]);
  const [version, setVersion] = useState(0);
  const [dragging, setDragging] = useState(false);
  const relistTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const fileInput = useRef<HTMLInputElement>(null);
  const folderInput = useRef<HTMLInputElement>(null);

  // The listing, again whenever the directory, the deleted toggle or `version` changes.
  useEffect(() => {
    const abort = new AbortController();
    (async () => {
      const all: Resource[] = [];
      for await (const page of clients.resources.list(
        { store, path, includeDeleted: showDeleted, asOf },
        { signal: abort.signal },
      )) {
        all.push(...page.entries);
      }
      setEntries(all);
      setError(undefined);
    })().catch((err) => {
      if (abort.signal.aborted) return;
      setError(errorText(err));
      setEntries([]);
    });
    return () => abort.abort();
  }, [store, path, showDeleted, version, asOf]);

  const relist = () => {
    clearTimeout(relistTimer.current);
    relistTimer.current = setTimeout(() => setVersion((v) => v + 1), 100);
  };

  // The store's feed: a change inside this directory (or to it) relists; a reset relists.
  const pathRef = useRef(path);
  pathRef.current = path;
  useEffect(() => {
    setFeed([]);
    const stop = followStore({
      clients,
      store,
      onState: (state, reason) => setLive({ state, reason }),
      onEvent: (event) => {
        if (event.kind === "reset") {
          add({ id: `reset-${event.eventId}-${Date.now()}`, text: `RESET at event ${event.eventId}: relisting` });
          relist();
          return;
        }
        const c = event.change;
        const op = c.operation === 2 ? "DELETE" : "MODIFY";
        add({
          id: `${c.eventId}`,
          // The event's own time, from the server (0 for a live directory: not recorded).
          millis: Number(c.timeMillis),
          text: `#${c.eventId} ${op} /${c.path}${c.directory && c.path !== "" ? "/" : ""}`,
        });
        const here = pathRef.current;
        if (c.path !== "" && (parentPath(c.path) === here || c.path === here)) relist();
      },
    });
    const add = (entry: FeedEntry) => setFeed((f) => [entry, ...f].slice(0, MAX_FEED));
    return stop;
  }, [store]);

  const sorted = useMemo(() => sortListing(entries ?? [], sort), [entries, sort]);

  const seenOf = (relativePath: string): Seen => {
    const top = relativePath.includes("/") ? undefined : entries?.find((e) => e.name === relativePath && !e.deleted);
    return top ? { tag: top.tag } : { absent: true };
  };

  const upload = async (picked: { files: PickedFile[]; dirs: string[] }) => {
    if (picked.files.length === 0 && picked.dirs.length === 0) return;
    for (const dir of picked.dirs) {
      try {
        await clients.resources.makeDirectory({ store, path: joinPath(path, dir) });
      } catch (err) {
        if (ConnectError.from(err).code !== Code.AlreadyExists) {
          setStatus(`Folder ${dir} could not be created: ${errorText(err)}`);
          return;
        }
      }
    }
    const batch: Upload[] = picked.files.map(({ file, relativePath }) => ({
      id: ++uploadIds,
      path: joinPath(path, relativePath),
      size: file.size,
      sent: 0,
      state: "waiting",
      file,
    }));
    setUploads((u) => [...batch, ...u.filter((x) => x.state !== "done")]);
    const update = (id: number, change: Partial<Upload>) =>
      setUploads((u) => u.map((x) => (x.id === id ? { ...x, ...change } : x)));
    for (const [i, item] of batch.entries()) {
      await send(item, seenOf((picked.files[i] as PickedFile).relativePath), update);
    }
    setStatus(`${batch.length} ${batch.length === 1 ? "file" : "files"} uploaded to /${path}.`);
    relist();
  };

  const send = async (item: Upload, seen: Seen, update: (id: number, change: Partial<Upload>) => void) => {
    update(item.id, { state: "sending", message: undefined });
    const outcome = await putResource({
      store,
      path: item.path,
      body: item.file,
      token: session.token,
      seen,
      onProgress: (sent) => update(item.id, { sent }),
    });
    if (outcome.kind === "written") update(item.id, { state: "done", sent: item.size });
    else update(item.id, { state: outcome.kind, message: outcome.message });
  };

  const overwriteUpload = async (item: Upload) => {
    const current = await clients.resources.stat({ store, path: item.path }).then(
      (r) => (r.resource && !r.resource.deleted ? { tag: r.resource.tag } : undefined),
      () => undefined,
    );
    await send(item, overwriteSeen(current), (id, change) =>
      setUploads((u) => u.map((x) => (x.id === id ? { ...x, ...change } : x))),
    );
    relist();
  };

  const onDrop = async (event: DragEvent) => {
    event.preventDefault();
    setDragging(false);
    if (!event.dataTransfer) return;
    await upload(await droppedFiles(event.dataTransfer));
  };

  const download = async (entry: Resource) => {
    try {
      saveAs((await readResource(clients, store, entry.path, undefined, asOf ? { asOf } : {})).bytes, entry.name);
    } catch (err) {
      setStatus(`Download failed: ${errorText(err)}`);
    }
  };

  return (
    <div class="browse">
      <FolderTree store={store} path={path} version={version} />
      <section
        class={`directory${dragging ? " dragging" : ""}`}
        aria-labelledby="directory-title"
        onDragOver={(e) => {
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={onDrop}
      >
        <nav aria-label="Breadcrumbs" class="crumbs">
          <ol>
            {breadcrumbs(store, path).map((c) => (
              <li key={c.href}>
                <a href={c.href} aria-current={c.current ? "page" : undefined}>
                  {c.label}
                </a>
              </li>
            ))}
          </ol>
        </nav>
        <div class="title-row">
          <h1 id="directory-title">/{path}</h1>
          <LiveBadge state={live.state} reason={live.reason} />
        </div>
        <AsOfBar
          asOf={asOf}
          onShow={(moment) => navigate(asOfHref(browseHref(store, path), moment))}
          onRestore={() => setRestoringFolder(true)}
          nowHref={browseHref(store, path)}
        />
        {/* Read-only as of a moment: nothing to write there. */}
        {!asOf && (
          <div class="toolbar">
            <button type="button" onClick={() => setMaking(true)}>
              New folder
            </button>
            <button type="button" class="secondary" onClick={() => fileInput.current?.click()}>
              Upload files
            </button>
            <button type="button" class="secondary" onClick={() => folderInput.current?.click()}>
              Upload a folder
            </button>
            <input
              ref={fileInput}
              type="file"
              multiple
              hidden
              aria-label="Files to upload"
              onChange={(e) => {
                const input = e.currentTarget;
                if (input.files) void upload(pickedFiles(input.files)).then(() => (input.value = ""));
              }}
            />
            <input
              ref={folderInput}
              type="file"
              hidden
              aria-label="Folder to upload"
              {...{ webkitdirectory: "" }}
              onChange={(e) => {
                const input = e.currentTarget;
                if (input.files) void upload(pickedFiles(input.files)).then(() => (input.value = ""));
              }}
            />
            <label class="check">
              <input type="checkbox" checked={showDeleted} onChange={(e) => setShowDeleted(e.currentTarget.checked)} />
              Show deleted
            </label>
            <span class="hint">or drop files and folders here</span>
          </div>
        )}
        <p class="status" role="status">
          {status}
        </p>
        <ErrorLine text={error} />
        {uploads.length > 0 && (
          <UploadList uploads={uploads} onOverwrite={overwriteUpload} onClear={() => setUploads([])} />
        )}
        {entries === undefined ? (
          <p class="loading">Loading…</p>
        ) : (
          <Listing
            store={store}
            asOf={asOf || undefined}
            entries={sorted}
            sort={sort}
            onSort={(key) => setSort(nextSort(sort, key))}
            onOpen={setViewing}
            onDownload={download}
            onDelete={setDeleting}
          />
        )}
      </section>
      <FeedPanel entries={feed} />
      {viewing && (
        <Viewer
          store={store}
          entry={viewing}
          asOf={asOf || undefined}
          onClose={() => setViewing(undefined)}
          onSaved={relist}
          onHistory={() => {
            setViewing(undefined);
            setHistory(viewing.path);
          }}
        />
      )}
      {history !== undefined && (
        <HistoryDialog store={store} path={history} onClose={() => setHistory(undefined)} onRestored={relist} />
      )}
      {restoringFolder && (
        <RestoreFolder
          store={store}
          path={path}
          asOf={asOf}
          onClose={() => setRestoringFolder(false)}
          onRestored={(text) => {
            setRestoringFolder(false);
            setStatus(text);
            navigate(browseHref(store, path));
          }}
        />
      )}
      {making && (
        <MakeFolder
          store={store}
          dir={path}
          onClose={() => setMaking(false)}
          onMade={(name) => {
            setMaking(false);
            setStatus(`Folder ${name} created.`);
            relist();
          }}
        />
      )}
      {deleting && (
        <DeleteEntry
          store={store}
          entry={deleting}
          onClose={() => setDeleting(undefined)}
          onDeleted={(count) => {
            setDeleting(undefined);
            setStatus(`${deleting.name} deleted (${count} ${count === 1 ? "entry" : "entries"}).`);
            relist();
          }}
        />
      )}
    </div>
  );
}

function UploadList(props: { uploads: Upload[]; onOverwrite(u: Upload): void; onClear(): void }) {
  return (
    <section class="uploads" aria-labelledby="uploads-title">
      <div class="title-row">
        <h2 id="uploads-title">Uploads</h2>
        <button type="button" class="secondary" onClick={props.onClear}>
          Clear
        </button>
      </div>
      <ul>
        {props.uploads.map((u) => (
          <li key={u.id} class={u.state}>
            <span class="path">/{u.path}</span>
            <progress
              max={u.size || 1}
              value={u.state === "done" ? u.size || 1 : u.sent}
              aria-label={`Upload of ${u.path}`}
            />
            <span class="state">
              {u.state === "done"
                ? "uploaded"
                : u.state === "sending"
                  ? `${Math.round((100 * u.sent) / (u.size || 1))}%`
                  : u.state === "conflict"
                    ? "changed since you opened it"
                    : u.state === "failed"
                      ? u.message
                      : "waiting"}
            </span>
            {u.state === "conflict" && (
              <button type="button" class="danger" onClick={() => props.onOverwrite(u)}>
                Overwrite
              </button>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}

function MakeFolder(props: { store: string; dir: string; onClose(): void; onMade(name: string): void }) {
  const { clients } = useApp();
  const [name, setName] = useState("");
  const [error, setError] = useState<string>();
  const submit = async (event: Event) => {
    event.preventDefault();
    const problem = nameProblem(name);
    if (problem) {
      setError(problem);
      return;
    }
    try {
      await clients.resources.makeDirectory({ store: props.store, path: joinPath(props.dir, name.trim()) });
      props.onMade(name.trim());
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <Dialog title={`New folder in /${props.dir}`} onClose={props.onClose}>
      <form class="form" onSubmit={submit}>
        <ErrorLine text={error} />
        <label for="folder-name">Name</label>
        <input id="folder-name" value={name} onInput={(e) => setName(e.currentTarget.value)} autofocus required />
        <div class="buttons">
          <button type="submit">Create</button>
          <button type="button" class="secondary" onClick={props.onClose}>
            Cancel
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function DeleteEntry(props: { store: string; entry: Resource; onClose(): void; onDeleted(count: number): void }) {
  const { clients } = useApp();
  const { entry } = props;
  const [counts, setCounts] = useState<{ files: number; dirs: number }>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (!entry.directory) return;
    const abort = new AbortController();
    (async () => {
      const c = { files: 0, dirs: 0 };
      for await (const page of clients.resources.list(
        { store: props.store, path: entry.path, recursive: true },
        { signal: abort.signal },
      )) {
        for (const e of page.entries) {
          if (e.directory) c.dirs++;
          else c.files++;
        }
      }
      setCounts(c);
    })().catch((err) => {
      if (!abort.signal.aborted) setError(errorText(err));
    });
    return () => abort.abort();
  }, [entry.path]);

  const remove = async () => {
    setBusy(true);
    try {
      const r = await clients.resources.delete({ store: props.store, path: entry.path, ifMatch: [entry.tag] });
      props.onDeleted(Number(r.deletedCount));
    } catch (err) {
      const e = ConnectError.from(err);
      setError(
        e.code === Code.FailedPrecondition
          ? "Changed since you opened it: close this and look again before deleting."
          : errorText(err),
      );
      setBusy(false);
    }
  };

  const what = entry.directory
    ? counts === undefined
      ? "Counting what it holds…"
      : `The folder ${entry.name} and everything in it go: ${counts.files} ${counts.files === 1 ? "file" : "files"} and ${counts.dirs} ${counts.dirs === 1 ? "folder" : "folders"}.`
    : `The resource ${entry.name} goes.`;
  return (
    <Dialog title={`Delete ${entry.path}?`} onClose={props.onClose}>
      <ErrorLine text={error} />
      <p>{what} Followers of the store see the deletion; the store keeps a tombstone for its keep-deleted time.</p>
      <ConfirmButtons
        onConfirm={remove}
        onCancel={props.onClose}
        disabled={busy || (entry.directory && counts === undefined)}
      >
        Delete
      </ConfirmButtons>
    </Dialog>
  );
}

/**
 * "Browse as of": a moment picked in the browser's zone shows the directory as it was then
 * (ListRequest.as_of); in that view, the way back to now and "Restore this folder as it was".
 */
function AsOfBar(props: { asOf: string; nowHref: string; onShow(moment: string): void; onRestore(): void }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState<string>();
  if (props.asOf) {
    const millis = Date.parse(props.asOf);
    const shown = /^\d+$/.test(props.asOf)
      ? `event ${props.asOf}`
      : Number.isNaN(millis)
        ? props.asOf
        : formatTime(millis);
    return (
      <section class="as-of-banner" aria-label="Earlier state">
        <p>
          Showing this folder <strong>as it was at {shown}</strong> (read-only).
        </p>
        <div class="buttons">
          <button type="button" class="danger" onClick={props.onRestore}>
            Restore this folder as it was…
          </button>
          <a href={props.nowHref} class="button secondary">
            Back to now
          </a>
        </div>
      </section>
    );
  }
  return (
    <form
      class="as-of"
      aria-label="Browse as of a moment"
      onSubmit={(e) => {
        e.preventDefault();
        const moment = momentOfLocal(value);
        if (!moment) {
          setError("Choose a date and time.");
          return;
        }
        setError(undefined);
        props.onShow(moment);
      }}
    >
      <label for="as-of-moment">Browse as of</label>
      <input
        id="as-of-moment"
        type="datetime-local"
        step={1}
        value={value}
        onInput={(e) => setValue(e.currentTarget.value)}
      />
      <button type="submit" class="secondary">
        Show
      </button>
      <ErrorLine text={error} />
    </form>
  );
}

/** The subtree back to the moment: a dry run lists what would change, then the restore makes it so. */
function RestoreFolder(props: {
  store: string;
  path: string;
  asOf: string;
  onClose(): void;
  onRestored(text: string): void;
}) {
  const { clients } = useApp();
  const [plan, setPlan] = useState<RestoreResponse>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    clients.resources
      .restore({ store: props.store, path: props.path, asOf: props.asOf, dryRun: true })
      .then(setPlan, (err) => setError(errorText(err)));
  }, [props.store, props.path, props.asOf]);

  const restore = async () => {
    if (!plan) return;
    setBusy(true);
    try {
      // The event the dry run resolved the moment to: the same moment, even if the store moved on.
      const r = await clients.resources.restore({
        store: props.store,
        path: props.path,
        asOf: String(plan.asOfEventId),
      });
      const n = r.changes.length;
      props.onRestored(
        `/${props.path} restored as it was at event ${plan.asOfEventId}: ${n} ${n === 1 ? "change" : "changes"}.`,
      );
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };

  const n = plan?.changes.length ?? 0;
  return (
    <Dialog title={`Restore /${props.path} as it was?`} wide onClose={props.onClose}>
      <ErrorLine text={error} />
      {!plan && !error && <p class="loading">Working out what would change (a dry run)…</p>}
      {plan && n === 0 && <p>Nothing differs: the folder is as it was at event {String(plan.asOfEventId)}.</p>}
      {plan && n > 0 && (
        <>
          <p>
            {n} {n === 1 ? "change" : "changes"} bring the folder back to event {String(plan.asOfEventId)}, each an
            ordinary change that followers see; what is replaced or deleted stays in the history.
          </p>
          <ul class="restore-plan" aria-label="What the restore changes">
            {plan.changes.map((c) => (
              <li key={`${c.operation} ${c.path}`} class={c.operation}>
                <span class="badge">{c.operation === "create" ? "restore" : c.operation}</span>{" "}
                <code>
                  /{c.path}
                  {c.directory ? "/" : ""}
                </code>
              </li>
            ))}
          </ul>
        </>
      )}
      <ConfirmButtons onConfirm={restore} onCancel={props.onClose} disabled={busy || !plan || n === 0}>
        Restore {n} {n === 1 ? "change" : "changes"}
      </ConfirmButtons>
    </Dialog>
  );
}
