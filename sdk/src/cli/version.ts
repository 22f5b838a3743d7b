// The version of @trove/sdk, read once from its package.json (one directory above both src/ and
// dist/, from src/cli/ or dist/cli/), for `trove --version`.

import { readFileSync } from "node:fs";

export const SDK_VERSION: string = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;
