// Insights: projects and their environments, reports (created with the additional fields, watched
// from generating to generated with WatchReport, read as a table) and the report queries.

import { create as createMessage } from "@bufbuild/protobuf";
import type { ComponentType } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { Environment, Project, PromoteResponse } from "../../../sdk/src/gen/trove/insights/v1/projects_pb.js";
import {
  type ReportKey,
  ReportKeySchema,
  ReportState,
  type ReportStatus,
} from "../../../sdk/src/gen/trove/insights/v1/reports_pb.js";
import { errorText } from "../components/dialog.js";
import { ErrorLine } from "../components/error-line.js";
import { useApp } from "../context.js";
import type { GraphProps } from "./insights-graph.js";
import { type QueryResult, queryRows, type ReportDocument, type ReportEntry, reportRows } from "./insights-model.js";

const ADDITIONAL_FIELDS = ["lastPromotedDate", "lastPromotedBy"] as const;

export function InsightsScreen() {
  const { clients } = useApp();
  const [projects, setProjects] = useState<Project[]>();
  const [project, setProject] = useState<Project>();
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState("");

  const reload = () =>
    clients.projects.listProjects({}).then(
      (r) => {
        setProjects(r.projects);
        setError(undefined);
      },
      (err) => setError(errorText(err)),
    );
  useEffect(() => {
    void reload();
  }, []);

  return (
    <section aria-labelledby="insights-title">
      <div class="title-row">
        <h1 id="insights-title">Insights</h1>
      </div>
      <p class="status" role="status">
        {status}
      </p>
      <ErrorLine text={error} />
      <h2>Projects</h2>
      {projects === undefined && !error && <p class="loading">Loading projects…</p>}
      {projects && (
        <table class="grid projects">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Account</th>
              <th scope="col">Store</th>
              <th scope="col">ID</th>
            </tr>
          </thead>
          <tbody>
            {projects.length === 0 && (
              <tr>
                <td colSpan={4}>No projects yet.</td>
              </tr>
            )}
            {projects.map((p) => (
              <tr key={p.id}>
                <th scope="row">
                  <button
                    type="button"
                    class="secondary"
                    aria-pressed={project?.id === p.id}
                    onClick={() => setProject(p)}
                    aria-label={`Open project ${p.name}`}
                  >
                    {p.name}
                  </button>
                </th>
                <td>{p.account}</td>
                <td>{p.store}</td>
                <td>
                  <code>{p.id}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <NewProject
        onCreated={(p) => {
          setStatus(`Project ${p.name} created.`);
          setProject(p);
          void reload();
        }}
      />
      {project && <ProjectView key={project.id} project={project} onStatus={setStatus} />}
    </section>
  );
}

function NewProject(props: { onCreated(p: Project): void }) {
  const { clients } = useApp();
  const [name, setName] = useState("");
  const [account, setAccount] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const r = await clients.projects.createProject({ name: name.trim(), account: account.trim() });
      if (r.project) props.onCreated(r.project);
      setName("");
    } catch (err) {
      setError(errorText(err));
    }
    setBusy(false);
  };
  return (
    <form class="form" onSubmit={submit} aria-label="New project">
      <fieldset>
        <legend>New project</legend>
        <ErrorLine text={error} />
        <label for="project-name">Name</label>
        <input id="project-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <label for="project-account">Account</label>
        <input id="project-account" value={account} onInput={(e) => setAccount((e.target as HTMLInputElement).value)} />
        <div class="buttons">
          <button type="submit" disabled={busy}>
            Create project
          </button>
        </div>
      </fieldset>
    </form>
  );
}

function ProjectView(props: { project: Project; onStatus(s: string): void }) {
  const { clients } = useApp();
  const { project } = props;
  const [environments, setEnvironments] = useState<Environment[]>();
  const [environment, setEnvironment] = useState<Environment>();
  const [name, setName] = useState("");
  const [error, setError] = useState<string>();

  const reload = () =>
    clients.projects.listEnvironments({ projectId: project.id }).then(
      (r) => setEnvironments(r.environments),
      (err) => setError(errorText(err)),
    );
  useEffect(() => {
    void reload();
  }, [project.id]);

  const create = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    try {
      const r = await clients.projects.createEnvironment({ projectId: project.id, name: name.trim() });
      props.onStatus(`Environment ${r.environment?.name} created.`);
      setName("");
      if (r.environment) setEnvironment(r.environment);
      await reload();
    } catch (err) {
      setError(errorText(err));
    }
  };

  return (
    <section aria-labelledby="project-title">
      <h2 id="project-title">Project {project.name}: environments</h2>
      <ErrorLine text={error} />
      {environments && (
        <ul class="environments">
          {environments.length === 0 && <li>No environments yet.</li>}
          {environments.map((e) => (
            <li key={e.id}>
              <button
                type="button"
                class="secondary"
                aria-pressed={environment?.id === e.id}
                onClick={() => setEnvironment(e)}
                aria-label={`Open environment ${e.name}`}
              >
                {e.name}
              </button>
            </li>
          ))}
        </ul>
      )}
      <form class="form" onSubmit={create} aria-label="New environment">
        <label for="environment-name">New environment (a top-level directory of {project.store})</label>
        <input id="environment-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <div class="buttons">
          <button type="submit">Create environment</button>
        </div>
      </form>
      {environment && (
        <EnvironmentView
          key={environment.id}
          project={project}
          environment={environment}
          others={(environments ?? []).filter((e) => e.id !== environment.id)}
          onStatus={props.onStatus}
        />
      )}
    </section>
  );
}

function EnvironmentView(props: {
  project: Project;
  environment: Environment;
  others: Environment[];
  onStatus(s: string): void;
}) {
  const { clients } = useApp();
  const { project, environment } = props;
  const [fields, setFields] = useState<string[]>([...ADDITIONAL_FIELDS]);
  const [report, setReport] = useState<ReportStatus>();
  const [key, setKey] = useState<ReportKey>();
  const [document, setDocument] = useState<ReportDocument>();
  const [reportFields, setReportFields] = useState<string[]>([]);
  const [selected, setSelected] = useState<string[]>([]);
  const [error, setError] = useState<string>();

  // Follows the report with WatchReport until it is no longer generating, then reads the document.
  useEffect(() => {
    if (!key) return;
    const abort = new AbortController();
    (async () => {
      let last: ReportStatus | undefined;
      for await (const m of clients.reports.watchReport({ key }, { signal: abort.signal })) {
        last = m.status;
        setReport(m.status);
      }
      if (last?.state !== ReportState.GENERATED) return;
      let text = "";
      const decoder = new TextDecoder();
      for await (const m of clients.reports.getReportDocument({ key }, { signal: abort.signal })) {
        text += decoder.decode(m.chunk, { stream: true });
      }
      text += decoder.decode();
      setDocument(JSON.parse(text) as ReportDocument);
    })().catch((err) => {
      if (!abort.signal.aborted) setError(errorText(err));
    });
    return () => abort.abort();
  }, [key]);

  const create = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setDocument(undefined);
    setReport(undefined);
    try {
      const r = await clients.reports.createReport({
        projectId: project.id,
        environmentId: environment.id,
        additionalFields: fields,
      });
      const reportId = r.reportId[0] ?? "";
      setReportFields(fields);
      setSelected([]);
      setKey(createMessage(ReportKeySchema, { reportId, projectId: project.id, environmentId: environment.id }));
    } catch (err) {
      setError(errorText(err));
    }
  };

  const toggle = (field: string, on: boolean) =>
    setFields(ADDITIONAL_FIELDS.filter((f) => (f === field ? on : fields.includes(f))));

  return (
    <section aria-labelledby="environment-title">
      <h2 id="environment-title">Environment {environment.name}</h2>
      <form class="form" onSubmit={create} aria-label="New report">
        <fieldset>
          <legend>Additional fields</legend>
          {ADDITIONAL_FIELDS.map((f) => (
            <label key={f} class="check">
              <input
                type="checkbox"
                checked={fields.includes(f)}
                onChange={(e) => toggle(f, (e.target as HTMLInputElement).checked)}
              />{" "}
              {f}
            </label>
          ))}
        </fieldset>
        <div class="buttons">
          <button type="submit">Create report</button>
        </div>
      </form>
      <ErrorLine text={error} />
      {report && (
        <p class="report-state" aria-live="polite">
          Report <code>{report.id[0]}</code>: <strong>{stateName(report.state)}</strong>
          {report.reason && ` (${report.reason})`}
        </p>
      )}
      {key && document && <Queries reportKey={key} />}
      {key && document && (
        <GraphLoader
          key={key.reportId}
          entries={document.resources}
          reportKey={key}
          store={project.store}
          environmentName={environment.name}
        />
      )}
      {document && props.others.length > 0 && (
        <Promote
          project={project}
          from={environment}
          targets={props.others}
          paths={selected}
          onPromoted={(n, to) => props.onStatus(`${n} promoted to ${to}.`)}
        />
      )}
      {document && (
        <ReportTable
          entries={document.resources}
          fields={reportFields}
          selected={selected}
          onSelect={(path, on) => setSelected(on ? [...selected, path] : selected.filter((p) => p !== path))}
        />
      )}
    </section>
  );
}

export function stateName(state: ReportState): string {
  switch (state) {
    case ReportState.GENERATING:
      return "generating";
    case ReportState.GENERATED:
      return "generated";
    case ReportState.FAILED:
      return "failed";
    default:
      return "unknown";
  }
}

function ReportTable(props: {
  entries: ReportEntry[];
  fields: string[];
  selected: string[];
  onSelect(path: string, on: boolean): void;
}) {
  const rows = reportRows(props.entries);
  return (
    <table class="grid report" aria-label={`Report: ${rows.length} resources`}>
      <caption>{rows.length} resources</caption>
      <thead>
        <tr>
          <th scope="col">Resource</th>
          <th scope="col">Type</th>
          <th scope="col">Tags</th>
          <th scope="col">References</th>
          <th scope="col">Last promoted</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={r.path}>
            <th scope="row">
              <input
                type="checkbox"
                aria-label={`Select ${r.path}`}
                checked={props.selected.includes(r.path)}
                onChange={(e) => props.onSelect(r.path, (e.target as HTMLInputElement).checked)}
              />{" "}
              <code>{r.path}</code>
            </th>
            <td>{r.type}</td>
            <td>{r.tags}</td>
            <td>
              {r.references.map((ref) => (
                <div key={ref.path} class={ref.missing ? "error" : undefined}>
                  <code>{ref.path}</code>
                  {ref.missing && " (missing)"}
                </div>
              ))}
            </td>
            <td>{props.fields.includes("lastPromotedDate") ? r.lastPromoted : "not requested"}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

type QueryName = "dependencies" | "dependents" | "unused" | "missing" | "cycles";

function Queries(props: { reportKey: ReportKey }) {
  const { clients } = useApp();
  const key = props.reportKey;
  const [path, setPath] = useState("");
  const [result, setResult] = useState<QueryResult>();
  const [error, setError] = useState<string>();

  const run = async (query: QueryName) => {
    setError(undefined);
    try {
      switch (query) {
        case "dependencies": {
          const r = await clients.reports.getDependencies({ key, path });
          setResult({ title: `Dependencies of ${r.resource}`, rows: queryRows.related(r.all) });
          break;
        }
        case "dependents": {
          const r = await clients.reports.getDependents({ key, path });
          setResult({ title: `Dependents of ${r.resource}`, rows: queryRows.related(r.all) });
          break;
        }
        case "unused": {
          const r = await clients.reports.listUnusedResources({ key });
          setResult({ title: "Unused resources", rows: queryRows.related(r.resources) });
          break;
        }
        case "missing": {
          const r = await clients.reports.listMissingReferences({ key });
          setResult({ title: "Missing references", rows: queryRows.missing(r.references) });
          break;
        }
        case "cycles": {
          const r = await clients.reports.listCycles({ key });
          setResult({ title: "Cycles", rows: queryRows.cycles(r.cycles) });
          break;
        }
      }
    } catch (err) {
      setResult(undefined);
      setError(errorText(err));
    }
  };

  return (
    <section aria-labelledby="queries-title" class="queries">
      <h2 id="queries-title">Queries</h2>
      <form class="form" onSubmit={(e) => e.preventDefault()} aria-label="Queries">
        <label for="query-path">Resource path (for dependencies and dependents)</label>
        <input
          id="query-path"
          value={path}
          placeholder="/templates/letters/welcome-letter.template"
          onInput={(e) => setPath((e.target as HTMLInputElement).value)}
        />
        <div class="buttons">
          <button type="button" class="secondary" onClick={() => run("dependencies")}>
            Dependencies
          </button>
          <button type="button" class="secondary" onClick={() => run("dependents")}>
            Dependents
          </button>
          <button type="button" class="secondary" onClick={() => run("unused")}>
            Unused
          </button>
          <button type="button" class="secondary" onClick={() => run("missing")}>
            Missing references
          </button>
          <button type="button" class="secondary" onClick={() => run("cycles")}>
            Cycles
          </button>
        </div>
      </form>
      <ErrorLine text={error} />
      {result && (
        <div class="query-result" aria-live="polite">
          <h3>
            {result.title}: {result.rows.length}
          </h3>
          {result.rows.length === 0 ? (
            <p>None.</p>
          ) : (
            <ul>
              {result.rows.map((row) => (
                <li key={row}>
                  <code>{row}</code>
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </section>
  );
}

/** The dependency graph is its own chunk, loaded when asked for. */
function GraphLoader(props: GraphProps) {
  const [Graph, setGraph] = useState<ComponentType<GraphProps>>();
  const [error, setError] = useState<string>();
  if (Graph) return <Graph {...props} />;
  return (
    <div class="buttons">
      <button
        type="button"
        class="secondary"
        onClick={() =>
          import("./insights-graph.js").then(
            (m) => setGraph(() => m.DependencyGraph),
            (err) => setError(errorText(err)),
          )
        }
      >
        Show dependency graph
      </button>
      <ErrorLine text={error} />
    </div>
  );
}

/** Promotes the resources selected in the report to another environment; shows each file's outcome. */
function Promote(props: {
  project: Project;
  from: Environment;
  targets: Environment[];
  paths: string[];
  onPromoted(count: number, to: string): void;
}) {
  const { clients } = useApp();
  const [to, setTo] = useState(props.targets[0]?.id ?? "");
  const [outcome, setOutcome] = useState<PromoteResponse>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const target = props.targets.find((t) => t.id === to) ?? props.targets[0];

  const promote = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setOutcome(undefined);
    // No selection would mean "the whole environment" to the API: the console never sends that by accident.
    if (props.paths.length === 0 || !target) {
      setError("Select the resources to promote in the table first.");
      return;
    }
    setBusy(true);
    try {
      const r = await clients.projects.promote({
        projectId: props.project.id,
        fromEnvironmentId: props.from.id,
        toEnvironmentId: target.id,
        resources: props.paths.map((path) => ({ path })),
      });
      setOutcome(r);
      props.onPromoted(r.promotedCount, target.name);
    } catch (err) {
      setError(errorText(err));
    }
    setBusy(false);
  };

  return (
    <form class="form promote" onSubmit={promote} aria-label="Promote">
      <fieldset>
        <legend>Promote the selected resources ({props.paths.length})</legend>
        <label for="promote-to">To environment</label>
        <select id="promote-to" value={target?.id} onChange={(e) => setTo((e.target as HTMLSelectElement).value)}>
          {props.targets.map((t) => (
            <option key={t.id} value={t.id}>
              {t.name}
            </option>
          ))}
        </select>
        <div class="buttons">
          <button type="submit" disabled={busy}>
            Promote
          </button>
        </div>
        <ErrorLine text={error} />
        {outcome && (
          <table class="grid promoted" aria-label="Promotion result">
            <caption>
              {outcome.promotedCount} promoted, {outcome.failedCount} failed, by {outcome.promotedBy}
            </caption>
            <tbody>
              {outcome.resources.map((r) => (
                <tr key={r.path}>
                  <th scope="row">
                    <code>{r.path}</code>
                  </th>
                  <td class={r.error ? "error" : undefined}>
                    {r.error ? `${r.code}: ${r.error}` : `promoted, tag ${r.tag}`}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </fieldset>
    </form>
  );
}
