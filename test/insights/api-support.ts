// Helpers of the insights API tests: JSON calls, and the example project (examples/acme-letters)
// uploaded through the API as a project with its two environments.

import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const EXAMPLE = fileURLToPath(new URL("../../examples/acme-letters/", import.meta.url));
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const ISO_MS_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies of every shape
  json: any;
}

export async function call(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)["Content-Type"] ??= "application/json";
  }
  const res = await fetch(`${url}${path}`, init);
  const text = await res.text();
  let json: unknown;
  if ((res.headers.get("content-type") ?? "").startsWith("application/json")) json = JSON.parse(text);
  return { status: res.status, headers: res.headers, text, json };
}

export interface ExampleProject {
  projectID: string;
  store: string;
  environments: Record<"draft" | "production", string>;
  files: number;
}

/** Creates project `name` (account acme) with environments draft and production, and uploads the example. */
export async function uploadExample(
  url: string,
  name = "acme-letters",
  headers: Record<string, string> = {},
): Promise<ExampleProject> {
  const project = await call(url, "POST", "/insights/v1/projects", { name, account: "acme" }, headers);
  if (project.status !== 201) throw new Error(`create project: ${project.status} ${project.text}`);
  const environments = {} as Record<"draft" | "production", string>;
  let files = 0;
  for (const env of ["draft", "production"] as const) {
    const created = await call(
      url,
      "POST",
      `/insights/v1/projects/${project.json.id}/environments`,
      { name: env },
      headers,
    );
    if (created.status !== 201) throw new Error(`create environment: ${created.status} ${created.text}`);
    environments[env] = created.json.id;
    files += await upload(url, project.json.store, join(EXAMPLE, env), [env], headers);
  }
  return { projectID: project.json.id, store: project.json.store, environments, files };
}

async function upload(
  url: string,
  store: string,
  dir: string,
  segments: string[],
  headers: Record<string, string>,
): Promise<number> {
  let files = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = [...segments, entry.name];
    const target = `${url}/resources/v2/data/${store}/${path.map(encodeURIComponent).join("/")}`;
    if (entry.isDirectory()) {
      const res = await fetch(`${target}/`, { method: "PUT", headers });
      if (res.status !== 201 && res.status !== 200) throw new Error(`mkdir ${path.join("/")}: ${res.status}`);
      await res.arrayBuffer();
      files += await upload(url, store, join(dir, entry.name), path, headers);
    } else {
      const res = await fetch(target, { method: "PUT", headers, body: await readFile(join(dir, entry.name)) });
      if (res.status !== 201) throw new Error(`PUT ${path.join("/")}: ${res.status}`);
      await res.arrayBuffer();
      files++;
    }
  }
  return files;
}

/** Creates a report and waits until it is no longer generating; returns its ID and final status. */
export async function generatedReport(
  url: string,
  projectID: string,
  environmentID: string,
  additionalFields?: string[],
  headers: Record<string, string> = {},
): Promise<{ id: string; status: Answer; query: string }> {
  const body = additionalFields ? { projectID, environmentID, additionalFields } : { projectID, environmentID };
  const created = await call(url, "POST", "/insights/v1/reports", body, headers);
  if (created.status !== 202) throw new Error(`create report: ${created.status} ${created.text}`);
  const id = created.json.reportID[0] as string;
  const query = `projectID=${projectID}&environmentID=${environmentID}`;
  for (let i = 0; i < 100; i++) {
    const status = await call(url, "GET", `/insights/v1/reports/${id}?${query}&wait=10`, undefined, headers);
    if (status.status !== 200 || status.json.status !== "generating") return { id, status, query };
  }
  throw new Error("report still generating after 100 waits");
}
