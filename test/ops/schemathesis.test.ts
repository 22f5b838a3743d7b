// schemathesis (PyPI) against a live server with a token: every operation of docs/openapi.yaml, a
// bounded number of generated requests each (examples, coverage, fuzzing and the stateful phase that
// follows the document's links), twice: once with generated identifiers, once with the identifiers of
// real fixtures (a store with a file and a directory, a project, an environment, a generated report) so
// the requests reach past 404. Checks: no 5xx, every status, content type and body as documented.
// .ci/run installs schemathesis in a venv under ~/.cache/trove; TROVE_TEST_SCHEMATHESIS_BIN names another.

import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { XMLParser } from "fast-xml-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type DevIssuer, openDevIssuer } from "../../src/auth/dev-issuer.js";
import { startServer, type TestServer } from "../support/server.js";

const DOCUMENT = fileURLToPath(new URL("../../docs/openapi.yaml", import.meta.url));
/** The version .ci/run installs, and its venv. */
const VERSION = "4.32.5";
const VENV = join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "trove", `schemathesis-${VERSION}`);
const MISSING = `schemathesis is not installed: bash .ci/run installs it (a venv under ~/.cache/trove), or run
  python3 -m venv ${VENV} && ${VENV}/bin/pip install schemathesis==${VERSION}
or set TROVE_TEST_SCHEMATHESIS_BIN to an 'st' executable`;

/** The checks that hold for Trove (docs/operations.md, "OpenAPI", says why the others are left out). */
const CHECKS = [
  "not_a_server_error",
  "status_code_conformance",
  "content_type_conformance",
  "response_schema_conformance",
  "response_headers_conformance",
  "ignored_auth",
];
/** Generated requests per operation and phase: both runs take about half a minute on an idle machine. */
const MAX_EXAMPLES = 10;

function schemathesisBin(): string | undefined {
  const configured = process.env.TROVE_TEST_SCHEMATHESIS_BIN;
  if (configured) return configured;
  const bin = join(VENV, "bin", "st");
  return existsSync(bin) ? bin : undefined;
}

const METHODS = ["get", "head", "put", "post", "delete"];

/** "GET /resources/v2/poll", as schemathesis names an operation, for every operation of the document. */
function operationsOf(document: { paths: Record<string, Record<string, unknown>> }): string[] {
  const labels: string[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of METHODS) if (item[method]) labels.push(`${method.toUpperCase()} ${path}`);
  }
  return labels;
}

/** schemathesis leaves out the operation that serves the document it loaded: loading it is its test. */
const SELF = "GET /openapi.json";
const OPERATIONS = operationsOf(parse(readFileSync(DOCUMENT, "utf8"))).filter((label) => label !== SELF);

interface RunResult {
  /** Failures by operation label; an operation tested without failure has an empty list. */
  tested: Map<string, string[]>;
  output: string;
}

function run(bin: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(bin, args, { maxBuffer: 64 * 1024 * 1024, timeout: 240_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

async function schemathesis(
  bin: string,
  server: TestServer,
  token: string,
  dir: string,
  name: string,
  parameters: Record<string, string>,
): Promise<RunResult> {
  const junit = join(dir, `${name}.xml`);
  const config = join(dir, `${name}.toml`);
  const lines = Object.entries(parameters).map(([key, value]) => `"${key}" = ${JSON.stringify(value)}`);
  await writeFile(config, `[parameters]\n${lines.join("\n")}\n`);
  const { code, output } = await run(bin, [
    "--no-color",
    "--config-file",
    config,
    "run",
    `${server.url}/openapi.json`,
    "--url",
    server.url,
    "--header",
    `Authorization: Bearer ${token}`,
    "--checks",
    CHECKS.join(","),
    "--max-examples",
    String(MAX_EXAMPLES),
    "--seed",
    "20260301",
    // One worker: hypothesis's lambda descriptions are not thread-safe on Python 3.11 (a run error).
    "--workers",
    "1",
    "--request-timeout",
    "30",
    "--no-shrink",
    "--report",
    "junit",
    "--report-junit-path",
    junit,
  ]);
  if (!existsSync(junit)) throw new Error(`schemathesis wrote no report (exit ${code}):\n${output}`);
  const report = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "", isArray: (n) => n === "testcase" });
  const doc = report.parse(readFileSync(junit, "utf8")) as {
    testsuites: { testsuite: { testcase: Array<{ name: string; failure?: unknown; error?: unknown }> } };
  };
  const tested = new Map<string, string[]>();
  for (const c of doc.testsuites.testsuite.testcase) {
    const problems = [c.failure, c.error]
      .filter((p) => p !== undefined)
      .map((p) => (typeof p === "object" && p !== null ? String((p as Record<string, unknown>)["#text"]) : String(p)));
    tested.set(c.name, problems);
  }
  return { tested, output };
}

describe("schemathesis: the server answers as docs/openapi.yaml says", () => {
  const bin = schemathesisBin();
  let dir: string;
  let issuer: DevIssuer;
  let t: TestServer;
  const runs: RunResult[] = [];

  beforeAll(async () => {
    if (!bin) throw new Error(MISSING);
    dir = await mkdtemp(join(tmpdir(), "trove-schemathesis-"));
    issuer = await openDevIssuer({ dataDir: dir });
    // Short polls: a generated poll that follows a store answers 204 within a second.
    t = await startServer({ auth: issuer.authenticator, devIssuer: issuer, pollWait: 1000 });
    const token = await issuer.issue(3600);
    const fixtures = await createFixtures(t.url, token);
    runs.push(await schemathesis(bin, t, token, dir, "generated", {}));
    runs.push(await schemathesis(bin, t, token, dir, "fixtures", fixtures));
  }, 600_000);

  afterAll(async () => {
    await t?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it.each(OPERATIONS)("%s", (label) => {
    for (const [i, result] of runs.entries()) {
      const problems = result.tested.get(label);
      expect(problems, `run ${i + 1} did not test ${label}:\n${result.output}`).toBeDefined();
      expect(problems, `run ${i + 1}, ${label}`).toEqual([]);
    }
  });

  it(`${SELF}: schemathesis loads the served document as OpenAPI 3.1`, () => {
    for (const result of runs) {
      expect(result.output).toContain(`Loaded specification from ${t.url}/openapi.json`);
      expect(result.output).toContain("Open API 3.1.0");
    }
  });

  it("the stateful phase (following the document's links) finds nothing", () => {
    for (const result of runs) expect(result.tested.get("Stateful tests") ?? []).toEqual([]);
  });
});

/** A store with a directory and a file, a project with two environments and a generated report. */
async function createFixtures(base: string, token: string): Promise<Record<string, string>> {
  const auth = { Authorization: `Bearer ${token}` };
  const call = async (method: string, path: string, body?: unknown, expected = [200, 201, 202]) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...auth, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    if (!expected.includes(res.status)) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text === "" ? undefined : (JSON.parse(text.startsWith("{") ? text : "null") as Record<string, unknown>);
  };
  const project = (await call("POST", "/insights/v1/projects", { name: "fixtures" })) as { id: string; store: string };
  const draft = (await call("POST", `/insights/v1/projects/${project.id}/environments`, { name: "draft" })) as {
    id: string;
  };
  await call("POST", `/insights/v1/projects/${project.id}/environments`, { name: "production" });
  const data = `/resources/v2/data/${project.store}`;
  await call("PUT", `${data}/draft/letters/`);
  await call("PUT", `${data}/draft/letters/letter.template`, JSON.stringify({ name: "letter" }));
  const created = (await call("POST", "/insights/v1/reports", { projectID: project.id, environmentID: draft.id })) as {
    reportID: string[];
  };
  const reportID = created.reportID[0] as string;
  const status = await call(
    "GET",
    `/insights/v1/reports/${reportID}?projectID=${project.id}&environmentID=${draft.id}&wait=60`,
  );
  if (status?.status !== "generated") throw new Error(`the fixture report is ${JSON.stringify(status)}`);
  return {
    "path.store": project.store,
    "path.projectID": project.id,
    "query.projectID": project.id,
    "path.environmentID": draft.id,
    "query.environmentID": draft.id,
    "path.reportID": reportID,
    "query.path": "/letters/letter.template",
  };
}
