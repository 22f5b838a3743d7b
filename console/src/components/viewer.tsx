// A text resource opened to read and edit. Saving sends If-Match with the tag it was opened at: a
// change made meanwhile by anyone shows "changed since you opened it", with reload or overwrite.

import { useEffect, useState } from "preact/hooks";
import type { Resource } from "../../../sdk/src/gen/trove/resources/v2/resources_pb.js";
import { isText, readResource, saveAs } from "../content.js";
import { useApp } from "../context.js";
import { overwriteSeen, type Seen } from "../lib/conflict.js";
import { formatSize } from "../lib/format.js";
import { putResource } from "../upload.js";
import { Dialog, errorText } from "./dialog.js";
import { ErrorLine } from "./error-line.js";

const MAX_VIEW = 2 * 1024 * 1024;

export function Viewer(props: {
  store: string;
  entry: Resource;
  /** The moment the entry is shown as of (read-only); absent: the current version, editable. */
  asOf?: string;
  onClose(): void;
  onSaved(): void;
  /** Opens the resource's history (docs/console.md, "History"). */
  onHistory?(): void;
}) {
  const { clients, session } = useApp();
  const { entry } = props;
  const [text, setText] = useState<string>();
  const [edited, setEdited] = useState<string>();
  const [seen, setSeen] = useState<Seen>({ tag: entry.tag });
  const [error, setError] = useState<string>();
  const [conflict, setConflict] = useState<string>();
  const [status, setStatus] = useState("");
  const [busy, setBusy] = useState(false);
  const viewable = isText(entry.type) && Number(entry.size) <= MAX_VIEW;
  const at = props.asOf ? { asOf: props.asOf } : {};

  const load = async () => {
    setError(undefined);
    try {
      const content = await readResource(clients, props.store, entry.path, undefined, at);
      const body = await content.bytes.text();
      setText(body);
      setEdited(body);
      setSeen({ tag: content.tag });
      return content;
    } catch (err) {
      setError(errorText(err));
      return undefined;
    }
  };
  useEffect(() => {
    if (viewable) void load();
  }, [entry.path]);

  const save = async (target: Seen) => {
    setBusy(true);
    setStatus("");
    const outcome = await putResource({
      store: props.store,
      path: entry.path,
      body: edited ?? "",
      contentType: entry.type,
      token: session.token,
      seen: target,
    });
    setBusy(false);
    if (outcome.kind === "written") {
      setConflict(undefined);
      setText(edited);
      if (outcome.tag) setSeen({ tag: outcome.tag });
      setStatus("Saved.");
      props.onSaved();
    } else if (outcome.kind === "conflict") {
      setConflict(outcome.message);
    } else {
      setError(outcome.message);
    }
  };

  const overwrite = async () => {
    // Against the tag the server has now, so that a third change made meanwhile is caught again.
    const current = await clients.resources.stat({ store: props.store, path: entry.path }).then(
      (r) => (r.resource && !r.resource.deleted ? { tag: r.resource.tag } : undefined),
      () => undefined,
    );
    await save(overwriteSeen(current));
  };

  const reload = async () => {
    setConflict(undefined);
    setStatus((await load()) ? "Reloaded: this is the current version." : "");
  };

  const download = async () => {
    try {
      saveAs((await readResource(clients, props.store, entry.path, undefined, at)).bytes, entry.name);
    } catch (err) {
      setError(errorText(err));
    }
  };

  return (
    <Dialog title={entry.path} onClose={props.onClose}>
      {props.asOf && <p class="hint">As it was at {props.asOf}: read-only.</p>}
      <p class="hint">
        {entry.type || "no type"} · {formatSize(entry.size)} · tag <code>{"tag" in seen ? seen.tag : ""}</code>
      </p>
      <ErrorLine text={error} />
      {conflict && (
        <div class="conflict" role="alert">
          <p>
            <strong>Changed since you opened it.</strong> {conflict} Your text is still here: reload to see the current
            version (your edit is lost), or overwrite it with yours.
          </p>
          <div class="buttons">
            <button type="button" class="secondary" onClick={reload}>
              Reload
            </button>
            <button type="button" class="danger" onClick={overwrite}>
              Overwrite
            </button>
          </div>
        </div>
      )}
      {!viewable && <p>This resource is not text (or larger than 2 MiB): download it to see it.</p>}
      {viewable && text === undefined && !error && <p class="loading">Loading…</p>}
      {viewable && text !== undefined && (
        <>
          <label for="viewer-text">Contents</label>
          <textarea
            id="viewer-text"
            class="viewer"
            value={edited}
            readOnly={props.asOf !== undefined}
            spellcheck={false}
            onInput={(e) => setEdited((e.target as HTMLTextAreaElement).value)}
          />
        </>
      )}
      <p class="status" role="status">
        {status}
      </p>
      <div class="buttons">
        {viewable && !props.asOf && (
          <button type="button" onClick={() => save(seen)} disabled={busy || text === undefined || edited === text}>
            Save
          </button>
        )}
        <button type="button" class="secondary" onClick={download}>
          Download
        </button>
        {props.onHistory && !props.asOf && (
          <button type="button" class="secondary" onClick={props.onHistory}>
            History
          </button>
        )}
        <button type="button" class="secondary" onClick={props.onClose}>
          Close
        </button>
      </div>
    </Dialog>
  );
}
