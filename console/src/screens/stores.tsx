// Stores: the list (type, features, settings as the API shows them, secrets masked), create,
// update settings, and delete with a confirmation that names what is lost.

import { create } from "@bufbuild/protobuf";
import { useEffect, useState } from "preact/hooks";
import { type Store, StoreSchema } from "../../../sdk/src/gen/trove/resources/v2/stores_pb.js";
import { ColumnHeads } from "../components/column-heads.js";
import { ConfirmButtons, Dialog, errorText } from "../components/dialog.js";
import { ErrorLine } from "../components/error-line.js";
import { useApp } from "../context.js";
import { browseHref, nameProblem } from "../lib/paths.js";

// filesystem: serves the plain files of an existing folder (docs/filesystem-stores.md); it needs
// the setting filesystem-location, and no store changes type to or from it.
const STORE_TYPES = ["recursive", "snapshot", "filesystem"] as const;

export function StoresScreen() {
  const { clients } = useApp();
  const [stores, setStores] = useState<Store[]>();
  const [error, setError] = useState<string>();
  const [editing, setEditing] = useState<Store | "new">();
  const [deleting, setDeleting] = useState<Store>();
  const [status, setStatus] = useState("");

  const reload = () =>
    clients.stores.listStores({}).then(
      (r) => {
        setStores(r.stores);
        setError(undefined);
      },
      (err) => setError(errorText(err)),
    );
  useEffect(() => {
    void reload();
  }, []);

  return (
    <section aria-labelledby="stores-title">
      <div class="title-row">
        <h1 id="stores-title">Stores</h1>
        <button type="button" onClick={() => setEditing("new")}>
          New store
        </button>
      </div>
      <p class="status" role="status">
        {status}
      </p>
      <ErrorLine text={error} />
      {stores === undefined && !error && <p class="loading">Loading stores…</p>}
      {stores && (
        <table class="grid stores">
          <ColumnHeads columns={["Name", "Type", "Features", "Settings", "Last event"]} actions />
          <tbody>
            {stores.length === 0 && (
              <tr>
                <td colSpan={6}>No stores yet.</td>
              </tr>
            )}
            {stores.map((s) => (
              <tr key={s.name}>
                <th scope="row">
                  <a href={browseHref(s.name)}>{s.name}</a>
                </th>
                <td>{s.type}</td>
                <td>{s.features.join(", ")}</td>
                <td>
                  <StoreSettings store={s} />
                </td>
                <td>{String(s.lastEventId)}</td>
                <td class="actions">
                  <button type="button" class="secondary" onClick={() => setEditing(s)} aria-label={`Edit ${s.name}`}>
                    Edit
                  </button>
                  <button type="button" class="danger" onClick={() => setDeleting(s)} aria-label={`Delete ${s.name}`}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {editing && (
        <StoreForm
          store={editing === "new" ? undefined : editing}
          onClose={() => setEditing(undefined)}
          onSaved={(name, created) => {
            setEditing(undefined);
            setStatus(created ? `Store ${name} created.` : `Store ${name} updated.`);
            void reload();
          }}
        />
      )}
      {deleting && (
        <DeleteStore
          store={deleting}
          onClose={() => setDeleting(undefined)}
          onDeleted={() => {
            setDeleting(undefined);
            setStatus(`Store ${deleting.name} deleted.`);
            void reload();
          }}
        />
      )}
    </section>
  );
}

/**
 * The deployment settings, folded: one line ("keep-deleted 7d, keep-versions 30d, 9 settings")
 * that opens onto the whole list, so each store is one line in the table.
 */
function StoreSettings({ store }: { store: Store }) {
  if (store.settings.length === 0) return <span class="hint">none</span>;
  const retention = ["keep-deleted", "keep-versions"]
    .map((name) => store.settings.find((x) => x.name === name))
    .filter((x) => x !== undefined)
    .map((x) => `${x.name} ${x.value}`);
  const count = `${store.settings.length} ${store.settings.length === 1 ? "setting" : "settings"}`;
  return (
    <details class="settings">
      <summary>{retention.length > 0 ? `${retention.join(", ")} · ${count}` : count}</summary>
      <dl aria-label={`Settings of ${store.name}`}>
        {store.settings.map((x) => (
          <div key={x.name} class="setting-line">
            <dt>
              <code>{x.name}</code>
            </dt>
            <dd>
              <code>{x.value}</code>
            </dd>
          </div>
        ))}
      </dl>
    </details>
  );
}

interface SettingRow {
  name: string;
  value: string;
}

function StoreForm(props: { store?: Store; onClose(): void; onSaved(name: string, created: boolean): void }) {
  const { clients } = useApp();
  const existing = props.store;
  const [name, setName] = useState(existing?.name ?? "");
  const [type, setType] = useState(existing?.type || "recursive");
  const [settings, setSettings] = useState<SettingRow[]>(
    existing
      ? existing.settings.map((s) => ({ name: s.name, value: s.value }))
      : [
          { name: "keep-deleted", value: "7d" },
          // History (docs/history.md): earlier versions kept this long; 0 keeps none.
          { name: "keep-versions", value: "30d" },
        ],
  );
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    const problem = existing ? undefined : nameProblem(name);
    if (problem) {
      setError(`Name: ${problem}`);
      return;
    }
    setBusy(true);
    // A masked secret left as the API showed it is not sent, so it keeps its value.
    const changed = settings.filter(
      (s) => s.name.trim() !== "" && existing?.settings.find((e) => e.name === s.name)?.value !== s.value,
    );
    const store = create(StoreSchema, {
      name: existing?.name ?? name.trim(),
      type,
      settings: (existing ? changed : settings.filter((s) => s.name.trim() !== "")).map((s) => ({
        name: s.name.trim(),
        value: s.value,
      })),
    });
    try {
      if (existing) await clients.stores.updateStore({ store });
      else await clients.stores.createStore({ store });
      props.onSaved(store.name, !existing);
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };

  const update = (i: number, row: Partial<SettingRow>) =>
    setSettings(settings.map((s, j) => (i === j ? { ...s, ...row } : s)));

  return (
    <Dialog title={existing ? `Edit store ${existing.name}` : "New store"} onClose={props.onClose}>
      <form onSubmit={submit} class="form">
        <ErrorLine text={error} />
        {!existing && (
          <>
            <label for="store-name">Name</label>
            <input
              id="store-name"
              value={name}
              onInput={(e) => setName((e.target as HTMLInputElement).value)}
              required
            />
          </>
        )}
        <label for="store-type">Type</label>
        <select
          id="store-type"
          value={type}
          onChange={(e) => {
            const chosen = (e.target as HTMLSelectElement).value;
            setType(chosen);
            // A new filesystem store's folder: the one setting it needs, offered to fill in.
            if (!existing && chosen === "filesystem" && !settings.some((s) => s.name === "filesystem-location")) {
              setSettings([...settings, { name: "filesystem-location", value: "" }]);
            }
          }}
        >
          {STORE_TYPES.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
        <fieldset>
          <legend>Settings</legend>
          {settings.map((s, i) => (
            <div class="setting" key={i}>
              <label for={`setting-name-${i}`} class="visually-hidden">
                Setting name
              </label>
              <input
                id={`setting-name-${i}`}
                value={s.name}
                placeholder="name, e.g. keep-deleted"
                readOnly={existing?.settings.some((e) => e.name === s.name)}
                onInput={(e) => update(i, { name: (e.target as HTMLInputElement).value })}
              />
              <label for={`setting-value-${i}`} class="visually-hidden">
                Value of {s.name || "the setting"}
              </label>
              <input
                id={`setting-value-${i}`}
                value={s.value}
                onInput={(e) => update(i, { value: (e.target as HTMLInputElement).value })}
              />
            </div>
          ))}
          <button type="button" class="secondary" onClick={() => setSettings([...settings, { name: "", value: "" }])}>
            Add a setting
          </button>
        </fieldset>
        <div class="buttons">
          <button type="submit" disabled={busy}>
            {existing ? "Save" : "Create"}
          </button>
          <button type="button" class="secondary" onClick={props.onClose}>
            Cancel
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function DeleteStore(props: { store: Store; onClose(): void; onDeleted(): void }) {
  const { clients } = useApp();
  const [count, setCount] = useState<number>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    const abort = new AbortController();
    (async () => {
      let n = 0;
      for await (const page of clients.resources.list(
        { store: props.store.name, path: "", recursive: true },
        { signal: abort.signal },
      )) {
        n += page.entries.length;
      }
      setCount(n);
    })().catch((err) => {
      if (!abort.signal.aborted) setError(errorText(err));
    });
    return () => abort.abort();
  }, [props.store.name]);

  const remove = async () => {
    setBusy(true);
    try {
      await clients.stores.deleteStore({ name: props.store.name });
      props.onDeleted();
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };

  return (
    <Dialog title={`Delete store ${props.store.name}?`} onClose={props.onClose}>
      <ErrorLine text={error} />
      <p>
        {count === undefined
          ? "Counting what it holds…"
          : `The store ${props.store.name} and everything in it go: ${count} ${count === 1 ? "resource or directory" : "resources and directories"}, its settings and its change feed. Clients following it get a reset.`}
      </p>
      <ConfirmButtons onConfirm={remove} onCancel={props.onClose} disabled={busy || count === undefined}>
        Delete {props.store.name}
      </ConfirmButtons>
    </Dialog>
  );
}
