// The content-insights commands of `trove`: project (list, create, environments, promote) and
// report (create, status, list, download, query, diff). Projects and environments are named by
// ID or by name.

import type { Comparison, ReportKey, ReportStatusRecord, TroveInsightsClient } from "../insights.js";
import { formatMoment } from "../rest/client.js";
import { type Command, type Context, EXIT, out } from "./command.js";
import { UsageError } from "./config.js";

async function insights(ctx: Context): Promise<TroveInsightsClient> {
  // Loaded when a command runs: the insights client brings protobuf and Connect (CLI start-up).
  const { createInsightsClient } = await import("../insights.js");
  return createInsightsClient({ rest: await ctx.rest() });
}

function json(ctx: Context, value: unknown): void {
  out(ctx.io, `${JSON.stringify(value, null, 2)}\n`);
}

function need(value: string | undefined, what: string): string {
  if (value === undefined || value === "") throw new UsageError(`missing ${what}`);
  return value;
}

/** PROJECT and ENVIRONMENT arguments (IDs or names) as IDs. */
async function place(
  ctx: Context,
  client: TroveInsightsClient,
  project: string | undefined,
  environment: string | undefined,
): Promise<{ projectID: string; environmentID: string }> {
  const p = await client.findProject(
    need(project, "PROJECT (an ID or a name)"),
    ctx.values.account as string | undefined,
  );
  const e = await client.findEnvironment(p.id, need(environment, "ENVIRONMENT (an ID or a name)"));
  return { projectID: p.id, environmentID: e.id };
}

function statusLine(s: ReportStatusRecord): string {
  const parts = [s.status, s.id[0], s.created[0], s.creator];
  if (s.asOfEvent !== undefined) parts.push(`as-of ${s.asOfEvent}`);
  if (s.reason) parts.push(s.reason);
  return parts.join("  ");
}

/** A moment option (--as-of, --to-as-of), checked as the server checks it: a malformed one is a usage mistake. */
function momentOption(ctx: Context, name: "as-of" | "to-as-of"): string | undefined {
  const value = ctx.values[name] as string | undefined;
  if (value === undefined) return undefined;
  try {
    return formatMoment(value, `--${name}`);
  } catch (err) {
    if (err instanceof RangeError) throw new UsageError(err.message);
    throw err;
  }
}

const SIGNS = { added: "+", removed: "-", changed: "~" } as const;

/** `+ path`, `- path`, `~ path` per resource, then `+ path -> target  kind` per reference. */
function comparisonLines(c: Comparison): string {
  const lines = c.resources.map((r) => `${SIGNS[r.change] ?? "?"} ${r.path}`);
  for (const r of c.references) {
    const flags = [r.kind, r.missing ? "missing" : "", r.isDefault ? "default" : ""].filter((f) => f !== "");
    lines.push(`${SIGNS[r.change] ?? "?"} ${r.path} -> ${r.target}  ${flags.join("  ")}`);
  }
  return lines.map((l) => `${l}\n`).join("");
}

/** Exit code of a final status: a failed report is an error. */
function finalCode(ctx: Context, s: ReportStatusRecord): number {
  if (s.status === "failed") {
    ctx.io.stderr.write(`trove report: report ${s.id[0]} failed: ${s.reason ?? "no reason given"}\n`);
    return EXIT.error;
  }
  return EXIT.ok;
}

const ACCOUNT_OPTION = { account: { type: "string" } } as const;

export const INSIGHTS_COMMANDS: Record<string, Command> = {
  project: {
    help: `Usage: trove project ACTION ...

Content-insights projects (a project lives in a store; each environment is a top-level
directory of it). PROJECT and ENVIRONMENT are IDs or names.

  trove project list                             projects you may read
  trove project create NAME [--account A] [--store S]
  trove project show PROJECT                     its fields and environments (--json: as JSON)
  trove project env PROJECT                      list its environments
  trove project env PROJECT NAME                 create an environment
  trove project promote PROJECT FROM TO [PATH ...]
                                                 copy resources (directories: everything below;
                                                 no PATH: the whole environment) from FROM to TO,
                                                 recorded as lastPromotedDate / lastPromotedBy

Options:
      --account A     the project's account (create: default the token's; else: to tell
                      projects of the same name apart)
      --store S       create: the store to use (default: one named after the project)
      --json          JSON output
`,
    options: { ...ACCOUNT_OPTION, store: { type: "string" }, json: { type: "boolean" } },
    async run(ctx) {
      const [action = "list", ...args] = ctx.positionals;
      const client = await insights(ctx);
      const account = ctx.values.account as string | undefined;
      switch (action) {
        case "list": {
          if (args.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(args[0])}`);
          const projects = await client.listProjects();
          if (ctx.values.json) json(ctx, projects);
          else for (const p of projects) out(ctx.io, `${[p.id, p.account, p.name, p.store].join("  ")}\n`);
          return EXIT.ok;
        }
        case "create": {
          const name = need(args[0], "the project NAME");
          const store = ctx.values.store as string | undefined;
          const project = await client.createProject({
            name,
            ...(account ? { account } : {}),
            ...(store ? { store } : {}),
          });
          if (ctx.values.json) json(ctx, project);
          else out(ctx.io, `${project.id}\n`);
          return EXIT.ok;
        }
        case "show": {
          const project = await client.findProject(need(args[0], "PROJECT"), account);
          const environments = await client.listEnvironments(project.id);
          if (ctx.values.json) json(ctx, { ...project, environments });
          else {
            const fields = ["id", "name", "account", "store", "created", "creator"] as const;
            for (const f of fields) out(ctx.io, `${f.padEnd(13)}${project[f]}\n`);
            out(ctx.io, `environments${environments.length === 0 ? " (none)" : ":"}\n`);
            for (const e of environments) out(ctx.io, `  ${e.id}  ${e.name}\n`);
          }
          return EXIT.ok;
        }
        case "env": {
          const project = await client.findProject(need(args[0], "PROJECT"), account);
          if (args[1] === undefined) {
            const environments = await client.listEnvironments(project.id);
            if (ctx.values.json) json(ctx, environments);
            else for (const e of environments) out(ctx.io, `${e.id}  ${e.name}\n`);
            return EXIT.ok;
          }
          const environment = await client.createEnvironment(project.id, args[1]);
          if (ctx.values.json) json(ctx, environment);
          else out(ctx.io, `${environment.id}\n`);
          return EXIT.ok;
        }
        case "promote": {
          const project = await client.findProject(need(args[0], "PROJECT"), account);
          const from = await client.findEnvironment(project.id, need(args[1], "the FROM environment"));
          const to = await client.findEnvironment(project.id, need(args[2], "the TO environment"));
          const paths = args.slice(3);
          const result = await client.promote({
            projectID: project.id,
            fromEnvironmentID: from.id,
            toEnvironmentID: to.id,
            ...(paths.length > 0 ? { resources: paths } : {}),
          });
          if (ctx.values.json) json(ctx, result);
          else {
            for (const r of result.resources) {
              out(
                ctx.io,
                "tag" in r ? `promoted  ${r.path}  ${r.tag}\n` : `failed    ${r.path}  ${r.status} ${r.error}\n`,
              );
            }
          }
          return result.failed > 0 ? EXIT.error : EXIT.ok;
        }
        default:
          throw new UsageError(`unknown action ${JSON.stringify(action)}: list, create, show, env or promote`);
      }
    },
  },

  report: {
    help: `Usage: trove report ACTION ...

Content-insights reports of one environment of one project. PROJECT and ENVIRONMENT are IDs or
names; REPORT is the report's ID.

  trove report create PROJECT ENVIRONMENT [--field F ...] [--as-of T] [--wait]
                                       prints the report ID (with --wait, once generated)
  trove report status PROJECT ENVIRONMENT REPORT [--wait]
  trove report list PROJECT ENVIRONMENT
  trove report download PROJECT ENVIRONMENT REPORT [FILE] [--wait]
                                       the report document (JSON) to FILE or stdout
  trove report query PROJECT ENVIRONMENT REPORT QUERY [PATH]
      QUERY: dependencies PATH | dependents PATH | unused | missing | cycles
             | graph [--format dot|mermaid] [--root PATH]
  trove report diff PROJECT ENVIRONMENT [TO_ENVIRONMENT] [--as-of T] [--to-as-of T]
                                       what changed from ENVIRONMENT (as of T, default now) to
                                       TO_ENVIRONMENT (default the same one; as of --to-as-of,
                                       default now): '+ PATH' added, '- PATH' removed,
                                       '~ PATH' changed contents, then the references added and
                                       removed, '+ PATH -> TARGET  KIND'

T is an event id of the project's store or an ISO 8601 date-time with a time zone
(2026-11-27T15:00:00Z), standing for the store's last event at or before it. A moment older
than the history the store keeps (its keep-versions) exits 3.

Options:
      --field F        create: an additional field, lastPromotedDate or lastPromotedBy (repeatable)
      --as-of T        create: the environment as it was at T; diff: the first side's moment
      --to-as-of T     diff: the second side's moment
      --wait           wait until the report is generated (or failed: exit 1)
      --timeout S      give up waiting after S seconds (exit 1)
      --format F       graph: dot (default) or mermaid
      --root PATH      graph: only this resource and what it uses
      --account A      to tell projects of the same name apart
      --json           JSON output
`,
    options: {
      ...ACCOUNT_OPTION,
      field: { type: "string", multiple: true },
      wait: { type: "boolean" },
      timeout: { type: "string" },
      format: { type: "string" },
      root: { type: "string" },
      "as-of": { type: "string" },
      "to-as-of": { type: "string" },
      json: { type: "boolean" },
    },
    async run(ctx) {
      const [action, project, environment, ...args] = ctx.positionals;
      if (action === undefined) throw new UsageError("missing ACTION: create, status, list, download, query or diff");
      const asOf = momentOption(ctx, "as-of");
      const toAsOf = momentOption(ctx, "to-as-of");
      const client = await insights(ctx);
      const timeout = ctx.values.timeout === undefined ? undefined : Number(ctx.values.timeout);
      if (timeout !== undefined && !(timeout > 0)) throw new UsageError("--timeout takes a number of seconds");
      const wait = async (key: ReportKey) => {
        let lastShown = "";
        return client.waitForReport(key, {
          signal: ctx.io.signal,
          timeoutMs: timeout === undefined ? undefined : timeout * 1000,
          onStatus: (s) => {
            if (!ctx.quiet && ctx.io.stderr.isTTY && s.status !== lastShown) {
              lastShown = s.status;
              ctx.io.stderr.write(`report ${s.id[0]}: ${s.status}\n`);
            }
          },
        });
      };
      const keyOf = async (): Promise<ReportKey> => ({
        ...(await place(ctx, client, project, environment)),
        reportID: need(args[0], "REPORT (the report's ID)"),
      });
      switch (action) {
        case "create": {
          const fields = (ctx.values.field as string[] | undefined) ?? [];
          const where = await place(ctx, client, project, environment);
          const key = await client.createReport({
            ...where,
            ...(fields.length > 0 ? { additionalFields: fields as Array<"lastPromotedDate" | "lastPromotedBy"> } : {}),
            ...(asOf !== undefined ? { asOf } : {}),
          });
          if (!ctx.values.wait) {
            if (ctx.values.json) json(ctx, { reportID: [key.reportID] });
            else out(ctx.io, `${key.reportID}\n`);
            return EXIT.ok;
          }
          const status = await wait(key);
          if (ctx.values.json) json(ctx, status);
          else out(ctx.io, `${key.reportID}\n`);
          return finalCode(ctx, status);
        }
        case "status": {
          const key = await keyOf();
          const status = ctx.values.wait ? await wait(key) : await client.getReport(key);
          if (ctx.values.json) json(ctx, status);
          else out(ctx.io, `${statusLine(status)}\n`);
          return status.status === "generating" ? EXIT.ok : finalCode(ctx, status);
        }
        case "list": {
          const where = await place(ctx, client, project, environment);
          const reports = await client.listReports(where.projectID, where.environmentID);
          if (ctx.values.json) json(ctx, reports);
          else for (const r of reports) out(ctx.io, `${statusLine(r)}\n`);
          return EXIT.ok;
        }
        case "download": {
          const key = await keyOf();
          if (ctx.values.wait) {
            const status = await wait(key);
            if (status.status !== "generated") return finalCode(ctx, status);
          }
          const file = args[1];
          if (file !== undefined && file !== "-") {
            const size = await client.downloadReport(key, { as: "file", file, signal: ctx.io.signal });
            if (!ctx.quiet && ctx.io.stderr.isTTY) ctx.io.stderr.write(`${file}: ${size} bytes\n`);
            return EXIT.ok;
          }
          const stream = await client.downloadReport(key, { as: "stream", signal: ctx.io.signal });
          for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) ctx.io.stdout.write(chunk);
          return EXIT.ok;
        }
        case "query":
          return query(ctx, client, await keyOf(), args.slice(1));
        case "diff": {
          if (args.length > 1) throw new UsageError(`unexpected argument ${JSON.stringify(args[1])}`);
          const where = await place(ctx, client, project, environment);
          const to = args[0] === undefined ? undefined : await client.findEnvironment(where.projectID, args[0]);
          const comparison = await client.compareEnvironments({
            ...where,
            ...(asOf !== undefined ? { asOf } : {}),
            ...(to !== undefined ? { toEnvironmentID: to.id } : {}),
            ...(toAsOf !== undefined ? { toAsOf } : {}),
          });
          if (ctx.values.json) json(ctx, comparison);
          else out(ctx.io, comparisonLines(comparison));
          return EXIT.ok;
        }
        default:
          throw new UsageError(
            `unknown action ${JSON.stringify(action)}: create, status, list, download, query or diff`,
          );
      }
    },
  },
};

async function query(ctx: Context, client: TroveInsightsClient, key: ReportKey, args: string[]): Promise<number> {
  const [kind, path, extra] = args;
  if (extra !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(extra)}`);
  switch (kind) {
    case "dependencies":
    case "dependents": {
      const related =
        kind === "dependencies"
          ? await client.dependencies(key, need(path, "the resource PATH"))
          : await client.dependents(key, need(path, "the resource PATH"));
      if (ctx.values.json) json(ctx, related);
      else {
        for (const r of related.all) {
          out(ctx.io, `${[r.depth, r.type, r.path, r.missing ? "missing" : ""].join("  ").trimEnd()}\n`);
        }
      }
      return EXIT.ok;
    }
    case "unused": {
      const unused = await client.unusedResources(key);
      if (ctx.values.json) json(ctx, unused);
      else for (const u of unused) out(ctx.io, `${u.type}  ${u.path}\n`);
      return EXIT.ok;
    }
    case "missing": {
      const missing = await client.missingReferences(key);
      if (ctx.values.json) json(ctx, missing);
      else for (const m of missing) out(ctx.io, `${m.path}  ${m.kind}  ${m.relativePath}  ->  ${m.absolutePath}\n`);
      return EXIT.ok;
    }
    case "cycles": {
      const cycles = await client.cycles(key);
      if (ctx.values.json) json(ctx, cycles);
      else for (const c of cycles) out(ctx.io, `${c.cycle.join("  ->  ")}\n`);
      return EXIT.ok;
    }
    case "graph": {
      const format = (ctx.values.format as string | undefined) ?? "dot";
      if (format !== "dot" && format !== "mermaid") throw new UsageError("--format takes dot or mermaid");
      const root = ctx.values.root as string | undefined;
      out(ctx.io, await client.graph(key, { format, ...(root ? { root } : {}) }));
      return EXIT.ok;
    }
    default:
      throw new UsageError(
        `unknown query ${JSON.stringify(kind ?? "")}: dependencies, dependents, unused, missing, cycles or graph`,
      );
  }
}
