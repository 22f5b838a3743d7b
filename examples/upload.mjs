#!/usr/bin/env node
// Uploads a project directory to a running Trove over the Resource Server REST API v2: each
// top-level directory is an environment. Directories are created one by one (REST v2 never
// creates parents), then each file is PUT; its type comes from its extension on the server.
//
//   node examples/upload.mjs --url http://127.0.0.1:13242 --store acme-letters [--token T] [--dir D]

import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:13242" },
    store: { type: "string", default: "acme-letters" },
    token: { type: "string" },
    dir: { type: "string", default: fileURLToPath(new URL("./acme-letters/", import.meta.url)) },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (values.help) {
  console.log(`usage: node examples/upload.mjs [--url URL] [--store NAME] [--token TOKEN] [--dir DIRECTORY]

  --url    base address of Trove (default http://127.0.0.1:13242)
  --store  store to upload into; created (type recursive) when it does not exist (default acme-letters)
  --token  bearer token sent as "Authorization: Bearer TOKEN"
  --dir    project directory; each top-level directory is an environment (default examples/acme-letters)`);
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

const storePath = `/resources/v2/stores/${encodeURIComponent(values.store)}`;
const store = await call("GET", storePath);
if (store.status === 404) {
  const created = await call(
    "POST",
    "/resources/v2/stores",
    JSON.stringify({ name: values.store }),
    "application/json",
  );
  if (created.status !== 201) fail(`create store ${values.store}`, created);
  console.log(`created store ${values.store}`);
} else if (store.status !== 200) {
  fail(`read store ${values.store}`, store);
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
