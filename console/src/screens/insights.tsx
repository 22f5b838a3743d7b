// Insights as an application (issue 30): projects → a project's environments (and promotion, with a
// preview of what changes) → an environment's reports (status, creator, created, expiry; a new one
// followed where it was asked for) → one report, on tabs: Problems, Resources, Dependencies,
// Graph. Every place has its own URL (lib/insights-routes.ts).

import { create as createMessage } from "@bufbuild/protobuf";
import { type Timestamp, timestampMs } from "@bufbuild/protobuf/wkt";
import type { ComponentType } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import type { Environment, Project } from "../../../sdk/src/gen/trove/insights/v1/projects_pb.js";
import {
  type CompareEnvironmentsResponse,
  DiffKind,
  type GetDependenciesResponse,
  type ListCyclesResponse,
  type ListMissingReferencesResponse,
  type ReportKey,
  ReportKeySchema,
  ReportState,
  type ReportStatus,
} from "../../../sdk/src/gen/trove/insights/v1/reports_pb.js";
import { ColumnHeads } from "../components/column-heads.js";
import { ConfirmButtons, Dialog, errorText } from "../components/dialog.js";
import { ErrorLine } from "../components/error-line.js";
import { useApp } from "../context.js";
import { formatTime } from "../lib/format.js";
import { type InsightsPlace, insightsHref, type ReportTab } from "../lib/insights-routes.js";
import { kindOfReportType, reportTypeLabel } from "../lib/kinds.js";
import type { GraphProps } from "./insights-graph.js";
import {
  type ReportDocument,
  type ReportEntry,
  type ResourceSort,
  reportRows,
  resourceTable,
} from "./insights-model.js";
import type { ScreenProps } from "./registry.js";

const ADDITIONAL_FIELDS = ["lastPromotedDate", "lastPromotedBy"] as const;

const millis = (t: Timestamp | undefined) => (t ? timestampMs(t) : 0);

export function InsightsScreen({ params, search }: ScreenProps) {
  const place = params as InsightsPlace;
  const query = new URLSearchParams(search);
  const { clients } = useApp();
  const [project, setProject] = useState<Project>();
  const [environment, setEnvironment] = useState<Environment>();
  const [error, setError] = useState<string>();

  useEffect(() => {
    setError(undefined);
    if (!place.project) return setProject(undefined);
    clients.projects.getProject({ projectId: place.project }).then(
      (r) => setProject(r.project),
      (err) => setError(errorText(err)),
    );
  }, [place.project]);
  useEffect(() => {
    if (!place.project || !place.environment) return setEnvironment(undefined);
    clients.projects.getEnvironment({ projectId: place.project, environmentId: place.environment }).then(
      (r) => setEnvironment(r.environment),
      (err) => setError(errorText(err)),
    );
  }, [place.project, place.environment]);

  const ready =
    (!place.project || project?.id === place.project) && (!place.environment || environment?.id === place.environment);
  return (
    <section aria-labelledby="insights-title" class="insights">
      <nav aria-label="Insights" class="crumbs">
        <ol>
          <li>
            <a href={insightsHref({})} aria-current={!place.project ? "page" : undefined}>
              Insights
            </a>
          </li>
          {place.project && (
            <li>
              <a href={insightsHref({ project: place.project })} aria-current={!place.environment ? "page" : undefined}>
                {project?.name ?? "…"}
              </a>
            </li>
          )}
          {place.environment && (
            <li>
              <a
                href={insightsHref({ project: place.project, environment: place.environment })}
                aria-current={!place.report ? "page" : undefined}
              >
                {environment?.name ?? "…"}
              </a>
            </li>
          )}
          {place.report && (
            <li>
              <a href={insightsHref({ ...place, tab: "problems" })} aria-current="page">
                Report {place.report.slice(0, 8)}
              </a>
            </li>
          )}
        </ol>
      </nav>
      <ErrorLine text={error} />
      {!place.project && <ProjectsPage />}
      {ready && project && !place.environment && <ProjectPage project={project} />}
      {ready && project && environment && !place.report && (
        <EnvironmentPage project={project} environment={environment} />
      )}
      {ready && project && environment && place.report && (
        <ReportPage
          key={place.report}
          project={project}
          environment={environment}
          reportId={place.report}
          tab={place.tab ?? "problems"}
          path={query.get("path") ?? ""}
          show={query.get("show") ?? ""}
        />
      )}
    </section>
  );
}

function ProjectsPage() {
  const { clients, navigate } = useApp();
  const [projects, setProjects] = useState<Project[]>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    clients.projects.listProjects({}).then(
      (r) => setProjects(r.projects),
      (err) => setError(errorText(err)),
    );
  }, []);
  return (
    <>
      <div class="title-row">
        <h1 id="insights-title">Projects</h1>
      </div>
      <ErrorLine text={error} />
      {projects === undefined && !error && <p class="loading">Loading projects…</p>}
      {projects && (
        <table class="grid projects">
          <ColumnHeads columns={["Project", "Account", "Store", "Created", "Creator"]} />
          <tbody>
            {projects.length === 0 && (
              <tr>
                <td colSpan={5}>No projects yet: create one below.</td>
              </tr>
            )}
            {projects.map((p) => (
              <tr key={p.id}>
                <th scope="row">
                  <a href={insightsHref({ project: p.id })}>{p.name}</a>
                </th>
                <td>{p.account}</td>
                <td>{p.store}</td>
                <td>{formatTime(millis(p.created))}</td>
                <td>{p.creator}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <NameForm
        legend="New project"
        field="Name"
        id="project-name"
        extra={{ id: "project-account", label: "Account (optional)" }}
        submit="Create project"
        onSubmit={async (name, account) => {
          const r = await clients.projects.createProject({ name, account: account ?? "" });
          if (r.project) navigate(insightsHref({ project: r.project.id }));
        }}
      />
    </>
  );
}

/** A compact one-line form: a name (and an optional second field), a button, the API's refusal. */
function NameForm(props: {
  legend: string;
  field: string;
  id: string;
  extra?: { id: string; label: string };
  submit: string;
  onSubmit(name: string, extra?: string): Promise<void>;
}) {
  const [name, setName] = useState("");
  const [extra, setExtra] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="inline-form"
      aria-label={props.legend}
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(undefined);
        try {
          await props.onSubmit(name.trim(), extra.trim());
          setName("");
        } catch (err) {
          setError(errorText(err));
        }
        setBusy(false);
      }}
    >
      <strong>{props.legend}</strong>
      <label for={props.id}>{props.field}</label>
      <input id={props.id} size={18} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      {props.extra && (
        <>
          <label for={props.extra.id}>{props.extra.label}</label>
          <input id={props.extra.id} size={14} value={extra} onInput={(e) => setExtra(e.currentTarget.value)} />
        </>
      )}
      <button type="submit" disabled={busy}>
        {props.submit}
      </button>
      <ErrorLine text={error} />
    </form>
  );
}

function ProjectPage({ project }: { project: Project }) {
  const { clients, navigate } = useApp();
  const [environments, setEnvironments] = useState<Environment[]>();
  const [error, setError] = useState<string>();
  const [promoting, setPromoting] = useState<Environment>();
  const [status, setStatus] = useState("");
  useEffect(() => {
    clients.projects.listEnvironments({ projectId: project.id }).then(
      (r) => setEnvironments(r.environments),
      (err) => setError(errorText(err)),
    );
  }, [project.id]);
  return (
    <>
      <div class="title-row">
        <h1 id="insights-title">Project {project.name}</h1>
      </div>
      <p class="hint">
        Account {project.account}, store{" "}
        <a href={`/console/browse/${encodeURIComponent(project.store)}/`}>{project.store}</a>, created{" "}
        {formatTime(millis(project.created))} by {project.creator}.
      </p>
      <p class="status" role="status">
        {status}
      </p>
      <ErrorLine text={error} />
      <h2>Environments</h2>
      {environments && (
        <table class="grid environments">
          <ColumnHeads columns={["Environment", "Created", "Creator"]} actions />
          <tbody>
            {environments.length === 0 && (
              <tr>
                <td colSpan={4}>No environments yet: create one below.</td>
              </tr>
            )}
            {environments.map((e) => (
              <tr key={e.id}>
                <th scope="row">
                  <a href={insightsHref({ project: project.id, environment: e.id })}>{e.name}</a>
                </th>
                <td>{formatTime(millis(e.created))}</td>
                <td>{e.creator}</td>
                <td class="actions">
                  {environments.length > 1 && (
                    <button
                      type="button"
                      class="secondary"
                      onClick={() => setPromoting(e)}
                      aria-label={`Promote from ${e.name}…`}
                    >
                      Promote from {e.name}…
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <NameForm
        legend="New environment"
        field={`Name (a top-level folder of ${project.store})`}
        id="environment-name"
        submit="Create environment"
        onSubmit={async (name) => {
          const r = await clients.projects.createEnvironment({ projectId: project.id, name });
          if (r.environment) navigate(insightsHref({ project: project.id, environment: r.environment.id }));
        }}
      />
      {promoting && environments && (
        <Promote
          project={project}
          from={promoting}
          targets={environments.filter((e) => e.id !== promoting.id)}
          onClose={() => setPromoting(undefined)}
          onPromoted={(text) => {
            setPromoting(undefined);
            setStatus(text);
          }}
        />
      )}
    </>
  );
}

function EnvironmentPage({ project, environment }: { project: Project; environment: Environment }) {
  const { clients } = useApp();
  const [reports, setReports] = useState<ReportStatus[]>();
  const [fields, setFields] = useState<string[]>([...ADDITIONAL_FIELDS]);
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState("");
  const [watching, setWatching] = useState<string>();

  const reload = () =>
    clients.reports.listReports({ projectId: project.id, environmentId: environment.id }).then(
      (r) => setReports(r.reports),
      (err) => setError(errorText(err)),
    );
  useEffect(() => {
    void reload();
  }, [environment.id]);

  // A new report is followed (WatchReport) in its row, at the top of the list, next to the button.
  useEffect(() => {
    if (!watching) return;
    const abort = new AbortController();
    const key = createMessage(ReportKeySchema, {
      reportId: watching,
      projectId: project.id,
      environmentId: environment.id,
    });
    (async () => {
      for await (const m of clients.reports.watchReport({ key }, { signal: abort.signal })) {
        const s = m.status;
        if (!s) continue;
        setReports((list) => [s, ...(list ?? []).filter((r) => r.id[0] !== watching)]);
        setStatus(`Report ${watching.slice(0, 8)}: ${stateName(s.state)}${s.reason ? ` (${s.reason})` : ""}.`);
      }
    })().catch((err) => {
      if (!abort.signal.aborted) setError(errorText(err));
    });
    return () => abort.abort();
  }, [watching]);

  const createReport = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    try {
      const r = await clients.reports.createReport({
        projectId: project.id,
        environmentId: environment.id,
        additionalFields: fields,
      });
      const id = r.reportId[0] ?? "";
      setStatus(`Report ${id.slice(0, 8)}: requested.`);
      setWatching(id);
    } catch (err) {
      setError(errorText(err));
    }
  };

  return (
    <>
      <div class="title-row">
        <h1 id="insights-title">Environment {environment.name}</h1>
      </div>
      <form class="inline-form" onSubmit={createReport} aria-label="New report">
        <button type="submit">Create report</button>
        <span>with</span>
        {ADDITIONAL_FIELDS.map((f) => (
          <label key={f} class="check">
            <input
              type="checkbox"
              checked={fields.includes(f)}
              onChange={(e) =>
                setFields(ADDITIONAL_FIELDS.filter((x) => (x === f ? e.currentTarget.checked : fields.includes(x))))
              }
            />
            {f}
          </label>
        ))}
        <span class="report-progress" role="status">
          {status}
        </span>
      </form>
      <ErrorLine text={error} />
      <h2>Reports</h2>
      {reports === undefined && !error && <p class="loading">Loading reports…</p>}
      {reports && (
        <table class="grid reports">
          <ColumnHeads columns={["Report", "Status", "Creator", "Created", "Expires"]} />
          <tbody>
            {reports.length === 0 && (
              <tr>
                <td colSpan={5}>No reports yet: create one above.</td>
              </tr>
            )}
            {reports.map((r) => {
              const id = r.id[0] ?? "";
              return (
                <tr key={id} data-report={id}>
                  <th scope="row">
                    {r.state === ReportState.GENERATED ? (
                      <a href={insightsHref({ project: project.id, environment: environment.id, report: id })}>
                        <code>{id.slice(0, 8)}</code>
                      </a>
                    ) : (
                      <code>{id.slice(0, 8)}</code>
                    )}
                  </th>
                  <td>
                    <span class={`state ${stateName(r.state)}`}>{stateName(r.state)}</span>
                    {r.reason && <span class="hint"> {r.reason}</span>}
                  </td>
                  <td>{r.creator}</td>
                  <td>{formatTime(millis(r.created[0]))}</td>
                  <td>{r.expires ? formatTime(millis(r.expires)) : ""}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </>
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

const TAB_LABELS: Record<ReportTab, string> = {
  problems: "Problems",
  resources: "Resources",
  related: "Dependencies",
  graph: "Graph",
};

function ReportPage(props: {
  project: Project;
  environment: Environment;
  reportId: string;
  tab: ReportTab;
  path: string;
  show: string;
}) {
  const { clients } = useApp();
  const { project, environment } = props;
  const key = useMemo(
    () =>
      createMessage(ReportKeySchema, {
        reportId: props.reportId,
        projectId: project.id,
        environmentId: environment.id,
      }),
    [props.reportId],
  );
  const [document, setDocument] = useState<ReportDocument>();
  const [status, setStatus] = useState<ReportStatus>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    const abort = new AbortController();
    (async () => {
      const s = await clients.reports.getReport({ key }, { signal: abort.signal });
      setStatus(s.status);
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

  const place = { project: project.id, environment: environment.id, report: props.reportId };
  return (
    <>
      <div class="title-row">
        <h1 id="insights-title">
          Report {props.reportId.slice(0, 8)} of {environment.name}
        </h1>
      </div>
      {status && (
        <p class="hint">
          {document ? `${document.resources.length} resources, ` : ""}created {formatTime(millis(status.created[0]))} by{" "}
          {status.creator}
          {status.expires ? `, expires ${formatTime(millis(status.expires))}` : ""}.
        </p>
      )}
      <nav aria-label="Report views" class="tabs">
        {(Object.keys(TAB_LABELS) as ReportTab[]).map((tab) => (
          <a
            key={tab}
            href={insightsHref({ ...place, tab }, tab === "related" || tab === "graph" ? { path: props.path } : {})}
            aria-current={props.tab === tab ? "page" : undefined}
          >
            {TAB_LABELS[tab]}
          </a>
        ))}
      </nav>
      <ErrorLine text={error} />
      {!document && !error && <p class="loading">Loading the report…</p>}
      {document && props.tab === "problems" && <Problems reportKey={key} place={place} />}
      {document && props.tab === "resources" && <Resources entries={document.resources} place={place} />}
      {document && props.tab === "related" && (
        <Related reportKey={key} entries={document.resources} place={place} path={props.path} />
      )}
      {document && props.tab === "graph" && (
        <GraphLoader
          entries={document.resources}
          reportKey={key}
          store={project.store}
          environmentName={environment.name}
          focus={props.path}
          show={props.show}
          hrefFor={(query) => insightsHref({ ...place, tab: "graph" }, query)}
        />
      )}
    </>
  );
}

type Place = { project: string; environment: string; report: string };

/** A resource path that wraps after each "/" rather than inside a name. */
export function WrappingPath({ path }: { path: string }) {
  const parts = path.split("/");
  return (
    <code class="path">
      {parts.map((p, i) => (
        <span key={i}>
          {p}
          {i < parts.length - 1 && (
            <>
              /<wbr />
            </>
          )}
        </span>
      ))}
    </code>
  );
}

/** A resource type as a chip: its kind's colour (the graph's legend), its name in words. */
export function TypeChip({ type }: { type: string }) {
  return <span class={`chip kind-${kindOfReportType(type) ?? "other"}`}>{reportTypeLabel(type)}</span>;
}

function Problems({ reportKey, place }: { reportKey: ReportKey; place: Place }) {
  const { clients } = useApp();
  const [missing, setMissing] = useState<ListMissingReferencesResponse>();
  const [cycles, setCycles] = useState<ListCyclesResponse>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    Promise.all([
      clients.reports.listMissingReferences({ key: reportKey }),
      clients.reports.listCycles({ key: reportKey }),
    ]).then(
      ([m, c]) => {
        setMissing(m);
        setCycles(c);
      },
      (err) => setError(errorText(err)),
    );
  }, [reportKey]);
  if (error) return <ErrorLine text={error} />;
  if (!missing || !cycles) return <p class="loading">Looking for problems…</p>;
  const graphOf = (path: string) => insightsHref({ ...place, tab: "graph" }, { path });
  return (
    <section aria-labelledby="problems-title" class="problems">
      <h2 id="problems-title" class="visually-hidden">
        Problems
      </h2>
      {missing.references.length === 0 && cycles.cycles.length === 0 && (
        <p>No problems: every reference resolves, and no resource depends on itself.</p>
      )}
      {(missing.references.length > 0 || cycles.cycles.length > 0) && (
        <p>
          <a href={insightsHref({ ...place, tab: "graph" }, { show: "problems" })}>Show the problems in the graph</a>
        </p>
      )}
      <h3>Missing references: {missing.references.length}</h3>
      {missing.references.length > 0 && (
        <table class="grid missing" aria-label="Missing references">
          <thead>
            <tr>
              <th scope="col">Resource</th>
              <th scope="col">Refers to (missing)</th>
              <th scope="col">As</th>
            </tr>
          </thead>
          <tbody>
            {missing.references.map((r) => (
              <tr key={`${r.path}>${r.absolutePath}`}>
                <th scope="row">
                  <a href={graphOf(r.path)} aria-label={`${r.path} in the graph`}>
                    <WrappingPath path={r.path} />
                  </a>
                </th>
                <td class="error">
                  <WrappingPath path={r.absolutePath} />
                </td>
                <td>
                  <TypeChip type={r.kind} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Cycles: {cycles.cycles.length}</h3>
      {cycles.cycles.length > 0 && (
        <ol class="cycles">
          {cycles.cycles.map((c) => (
            <li key={c.cycle.join(">")}>
              {c.cycle.map((p, i) => (
                <span key={`${i}-${p}`}>
                  {i > 0 && (
                    <>
                      <span aria-hidden="true"> → </span>
                      <span class="visually-hidden"> refers to </span>
                    </>
                  )}
                  <a href={graphOf(p)}>
                    <WrappingPath path={p} />
                  </a>
                </span>
              ))}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

function Resources({ entries, place }: { entries: ReportEntry[]; place: Place }) {
  const [filter, setFilter] = useState("");
  const [kind, setKind] = useState("");
  const [sort, setSort] = useState<ResourceSort>({ key: "path", direction: "asc" });
  const rows = useMemo(
    () => resourceTable(reportRows(entries), { text: filter, type: kind }, sort),
    [entries, filter, kind, sort],
  );
  const types = useMemo(() => [...new Set(entries.map((e) => e.type))].sort(), [entries]);
  const header = (key: ResourceSort["key"], label: string) => (
    <th scope="col" aria-sort={sort.key === key ? (sort.direction === "asc" ? "ascending" : "descending") : undefined}>
      <button
        type="button"
        class="sort"
        onClick={() => setSort({ key, direction: sort.key === key && sort.direction === "asc" ? "desc" : "asc" })}
      >
        {label}
        <span aria-hidden="true">{sort.key === key ? (sort.direction === "asc" ? " ▲" : " ▼") : ""}</span>
      </button>
    </th>
  );
  return (
    <section aria-labelledby="resources-title">
      <h2 id="resources-title" class="visually-hidden">
        Resources
      </h2>
      <search class="inline-form">
        <label for="resource-filter">Filter</label>
        <input
          id="resource-filter"
          type="search"
          size={24}
          value={filter}
          placeholder="part of a path or tag"
          onInput={(e) => setFilter(e.currentTarget.value)}
        />
        <label for="resource-type">Type</label>
        <select id="resource-type" value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
          <option value="">all</option>
          {types.map((t) => (
            <option key={t} value={t}>
              {reportTypeLabel(t)}
            </option>
          ))}
        </select>
        <span role="status">
          {rows.length} of {entries.length} resources
        </span>
      </search>
      <table class="grid report" aria-label={`Resources: ${rows.length}`}>
        <thead>
          <tr>
            {header("path", "Resource")}
            {header("type", "Type")}
            <th scope="col">Tags</th>
            {header("references", "References")}
            {header("promoted", "Last promoted")}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.path} data-path={r.path}>
              <th scope="row">
                <a href={insightsHref({ ...place, tab: "related" }, { path: r.path })}>
                  <WrappingPath path={r.path} />
                </a>
              </th>
              <td>
                <TypeChip type={r.type} />
              </td>
              <td>{r.tags}</td>
              <td>
                {r.references.length}
                {r.references.some((x) => x.missing) && (
                  <span class="error"> ({r.references.filter((x) => x.missing).length} missing)</span>
                )}
              </td>
              <td>{r.lastPromoted}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

type RelatedList = Pick<GetDependenciesResponse, "all">;

function Related(props: { reportKey: ReportKey; entries: ReportEntry[]; place: Place; path: string }) {
  const { clients, navigate } = useApp();
  const [deps, setDeps] = useState<RelatedList>();
  const [dependents, setDependents] = useState<RelatedList>();
  const [error, setError] = useState<string>();
  const [typed, setTyped] = useState(props.path);
  useEffect(() => {
    setDeps(undefined);
    setDependents(undefined);
    setError(undefined);
    if (!props.path) return;
    Promise.all([
      clients.reports.getDependencies({ key: props.reportKey, path: props.path }),
      clients.reports.getDependents({ key: props.reportKey, path: props.path }),
    ]).then(
      ([a, b]) => {
        setDeps(a);
        setDependents(b);
      },
      (err) => setError(errorText(err)),
    );
  }, [props.path]);
  const list = (title: string, r: RelatedList | undefined) => (
    <section class="related-list" aria-label={title}>
      <h3>
        {title}: {r?.all.length ?? "…"}
      </h3>
      {r && r.all.length === 0 && <p>None.</p>}
      {r && r.all.length > 0 && (
        <ul>
          {r.all.map((x) => (
            <li key={x.path} class={x.missing ? "error" : undefined}>
              {x.missing ? (
                <WrappingPath path={x.path} />
              ) : (
                <a href={insightsHref({ ...props.place, tab: "related" }, { path: x.path })}>
                  <WrappingPath path={x.path} />
                </a>
              )}{" "}
              <TypeChip type={x.type} /> {x.depth > 1 ? `depth ${x.depth}` : "direct"}
              {x.missing && " (missing)"}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
  return (
    <section aria-labelledby="related-title">
      <h2 id="related-title" class="visually-hidden">
        Dependencies and dependents
      </h2>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          navigate(insightsHref({ ...props.place, tab: "related" }, { path: typed.trim() }));
        }}
      >
        <label for="related-path">Resource</label>
        <input
          id="related-path"
          list="report-paths"
          size={48}
          value={typed}
          onInput={(e) => setTyped(e.currentTarget.value)}
        />
        <datalist id="report-paths">
          {props.entries.map((e) => (
            <option key={e.path} value={e.path} />
          ))}
        </datalist>
        <button type="submit" class="secondary">
          Show
        </button>
        {props.path && <a href={insightsHref({ ...props.place, tab: "graph" }, { path: props.path })}>In the graph</a>}
      </form>
      <ErrorLine text={error} />
      {!props.path && <p class="hint">Choose a resource (or open one from the Resources tab).</p>}
      {props.path && !error && (
        <div class="related">
          {list("Dependencies (what it uses)", deps)}
          {list("Dependents (what uses it)", dependents)}
        </div>
      )}
    </section>
  );
}

/** The dependency graph is its own chunk, loaded with its tab. */
function GraphLoader(props: GraphProps) {
  const [Graph, setGraph] = useState<ComponentType<GraphProps>>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    import("./insights-graph.js").then(
      (m) => setGraph(() => m.DependencyGraph),
      (err) => setError(errorText(err)),
    );
  }, []);
  if (error) return <ErrorLine text={error} />;
  if (!Graph) return <p class="loading">Loading the graph…</p>;
  return <Graph {...props} />;
}

/**
 * Promotion from one environment to another, previewed first: the comparison of the target with
 * the source (CompareEnvironments) lists what the promotion would add and replace; the user picks
 * among those, then promotes. Resources only in the target are listed as kept (promotion deletes
 * nothing).
 */
function Promote(props: {
  project: Project;
  from: Environment;
  targets: Environment[];
  onClose(): void;
  onPromoted(text: string): void;
}) {
  const { clients } = useApp();
  const [to, setTo] = useState(props.targets[0]?.id ?? "");
  const [preview, setPreview] = useState<CompareEnvironmentsResponse>();
  const [chosen, setChosen] = useState<string[]>([]);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const target = props.targets.find((t) => t.id === to);

  useEffect(() => {
    setPreview(undefined);
    setError(undefined);
    if (!to) return;
    // Before: the target now; after: the source now. Added and changed are what a promotion writes.
    clients.reports
      .compareEnvironments({
        projectId: props.project.id,
        from: { environmentId: to },
        to: { environmentId: props.from.id },
      })
      .then(
        (r) => {
          setPreview(r);
          setChosen(r.resources.filter((d) => d.kind !== DiffKind.REMOVED).map((d) => d.path));
        },
        (err) => setError(errorText(err)),
      );
  }, [to]);

  const promote = async () => {
    if (!target) return;
    if (chosen.length === 0) {
      // No selection would mean "the whole environment" to the API: never sent by a slip.
      setError("Choose at least one resource to promote.");
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      const r = await clients.projects.promote({
        projectId: props.project.id,
        fromEnvironmentId: props.from.id,
        toEnvironmentId: target.id,
        resources: chosen.map((path) => ({ path })),
      });
      const failed = r.resources.filter((x) => x.error).map((x) => `${x.path}: ${x.code} ${x.error}`);
      props.onPromoted(
        `${r.promotedCount} promoted from ${props.from.name} to ${target.name} by ${r.promotedBy}` +
          (r.failedCount > 0 ? `; ${r.failedCount} failed: ${failed.join("; ")}` : "."),
      );
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };

  const writes = preview?.resources.filter((d) => d.kind !== DiffKind.REMOVED) ?? [];
  const kept = preview?.resources.filter((d) => d.kind === DiffKind.REMOVED) ?? [];
  return (
    <Dialog title={`Promote from ${props.from.name}`} wide onClose={props.onClose}>
      <div class="inline-form">
        <label for="promote-to">To environment</label>
        <select id="promote-to" value={to} onChange={(e) => setTo(e.currentTarget.value)}>
          {props.targets.map((t) => (
            <option key={t.id} value={t.id}>
              {t.name}
            </option>
          ))}
        </select>
      </div>
      <ErrorLine text={error} />
      {!preview && !error && <p class="loading">Comparing the two environments…</p>}
      {preview && (
        <>
          <p>
            {writes.length === 0
              ? `Nothing to promote: every resource of ${props.from.name} is the same in ${target?.name}.`
              : `What the promotion changes in ${target?.name}: ${writes.filter((d) => d.kind === DiffKind.ADDED).length} added, ${writes.filter((d) => d.kind === DiffKind.CHANGED).length} replaced. Untick what should stay as it is.`}
          </p>
          {writes.length > 0 && (
            <ul class="promote-preview" aria-label="Resources the promotion writes">
              {writes.map((d) => (
                <li key={d.path}>
                  <label class="check">
                    <input
                      type="checkbox"
                      checked={chosen.includes(d.path)}
                      onChange={(e) => {
                        const on = e.currentTarget.checked;
                        setChosen((c) => (on ? [...c, d.path] : c.filter((p) => p !== d.path)));
                      }}
                    />
                    <span class="badge">{d.kind === DiffKind.ADDED ? "add" : "replace"}</span>{" "}
                    <WrappingPath path={d.path} />
                  </label>
                </li>
              ))}
            </ul>
          )}
          {kept.length > 0 && (
            <p class="hint">
              {kept.length} {kept.length === 1 ? "resource is" : "resources are"} only in {target?.name}: promotion
              keeps {kept.length === 1 ? "it" : "them"}.
            </p>
          )}
          {preview.references.length > 0 && (
            <p class="hint">
              References that change: {preview.references.filter((r) => r.kind === DiffKind.ADDED).length} added,{" "}
              {preview.references.filter((r) => r.kind === DiffKind.REMOVED).length} removed
              {preview.references.some((r) => r.kind === DiffKind.ADDED && r.missing)
                ? `, ${preview.references.filter((r) => r.kind === DiffKind.ADDED && r.missing).length} of the added ones to a missing resource`
                : ""}
              .
            </p>
          )}
        </>
      )}
      <ConfirmButtons
        onConfirm={promote}
        onCancel={props.onClose}
        disabled={busy || !preview || writes.length === 0}
        danger={false}
      >
        Promote {chosen.length} {chosen.length === 1 ? "resource" : "resources"}
      </ConfirmButtons>
    </Dialog>
  );
}
