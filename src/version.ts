// The version of this build: the package's, read once from package.json (one directory above both
// src/ and dist/), so `trove --version`, the start-up log line and the build-info metric agree.

import { readFileSync } from "node:fs";

export const TROVE_VERSION: string = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
).version;
