#!/usr/bin/env node
// Uploads a project directory to a running Trove: the project and one environment per top-level
// directory through the insights API, then the files over the Resource Server REST API v2.
// Directories are created one by one (REST v2 never creates parents), then each file is PUT;
// its type comes from its extension on the server.
//
//   node examples/upload.mjs --url http://127.0.0.1:13242 [--project acme-letters] [--token T] [--dir D]

import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:13242" },
    project: { type: "string", default: "acme-letters" },
    account: { type: "string", default: "dev" },
    store: { type: "string" },
    token: { type: "string" },
    dir: { type: "string", default: fileURLToPath(new URL("./acme-letters/", import.meta.url)) },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (values.help) {
  console.log(`usage: node examples/upload.mjs [--url URL] [--project NAME] [--account ACCOUNT] [--store NAME]
                                [--token TOKEN] [--dir DIRECTORY]

  --url      base address of Trove (default http://127.0.0.1:13242)
  --project  content-insights project to upload into; created when the account has none of that
             name (default acme-letters)
  --account  the project's account (default dev, the development issuer's account)
  --store    store of a new project (default: the project's name)
  --token    bearer token sent as "Authorization: Bearer TOKEN"
  --dir      project directory; each top-level directory is an environment, created when missing
             (default examples/acme-letters)`);
  process.exit(0);
}

const base = values.url.replace(/\/+$/, "");
const headers = values.token ? { Authorization: `Bearer ${values.token}` } : {};

async function call(method, path, body, contentType) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: contentType ? { ...headers, "Content-Type": contentType } : headers,
    body,
  });
  const text = await response.text();
  return { status: response.status, text: text.trim() };
}

function fail(what, { status, text }) {
  console.error(`${what}: ${status}${text ? ` ${text}` : ""}`);
  process.exit(1);
}

// The project (content insights): created when the account has none of that name; its store is
// named after it. Each top-level directory of the example becomes an environment.
const projects = await call("GET", "/insights/v1/projects");
if (projects.status !== 200) fail("list projects", projects);
let project = JSON.parse(projects.text).projects.find((p) => p.name === values.project && p.account === values.account);
if (!project) {
  const created = await call(
    "POST",
    "/insights/v1/projects",
    JSON.stringify({ name: values.project, account: values.account, store: values.store }),
    "application/json",
  );
  if (created.status !== 201) fail(`create project ${values.project}`, created);
  project = JSON.parse(created.text);
  console.log(`created project ${project.name} (${project.id}) in store ${project.store}`);
}
values.store = project.store;
const environmentsPath = `/insights/v1/projects/${project.id}/environments`;
const listed = await call("GET", environmentsPath);
if (listed.status !== 200) fail("list environments", listed);
const environments = Object.fromEntries(JSON.parse(listed.text).environments.map((e) => [e.name, e.id]));
for (const entry of await readdir(values.dir, { withFileTypes: true })) {
  if (!entry.isDirectory() || environments[entry.name]) continue;
  const created = await call("POST", environmentsPath, JSON.stringify({ name: entry.name }), "application/json");
  if (created.status !== 201) fail(`create environment ${entry.name}`, created);
  environments[entry.name] = JSON.parse(created.text).id;
  console.log(`created environment ${entry.name} (${environments[entry.name]})`);
}

const dataPath = (segments, directory) =>
  `/resources/v2/data/${encodeURIComponent(values.store)}/${segments.map(encodeURIComponent).join("/")}${directory && segments.length > 0 ? "/" : ""}`;

let directories = 0;
let files = 0;

async function upload(dir, segments) {
  const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const entry of entries) {
    const path = [...segments, entry.name];
    if (entry.isDirectory()) {
      const answer = await call("PUT", dataPath(path, true));
      if (answer.status !== 201 && answer.status !== 200) fail(`PUT ${path.join("/")}/`, answer);
      directories++;
      await upload(join(dir, entry.name), path);
    } else if (entry.isFile() && segments.length > 0) {
      // No Content-Type: Trove types design resources by extension (application/vnd.trove.*+json).
      const answer = await call("PUT", dataPath(path, false), await readFile(join(dir, entry.name)));
      if (answer.status !== 201 && answer.status !== 200) fail(`PUT ${path.join("/")}`, answer);
      files++;
    }
  }
}

// Top-level files (such as the project's README) belong to no environment and are not uploaded.
await upload(values.dir, []);
console.log(`uploaded ${files} files in ${directories} directories to ${base}${dataPath([], true)}`);
console.log(`project ${project.id}`);
for (const [name, id] of Object.entries(environments)) console.log(`environment ${name} ${id}`);
console.log(`
a report of production (T="Authorization: Bearer $(npx trove token)"):
  curl -s -X POST ${base}/insights/v1/reports -H "$T" -H "Content-Type: application/json" \\
    -d '{"projectID":"${project.id}","environmentID":"${environments.production ?? ""}"}'`);
