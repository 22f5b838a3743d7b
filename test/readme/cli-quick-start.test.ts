// docs/cli.md's quick start, run top to bottom against a fresh server (run-document.ts, snippets.ts).

import { describeDocument } from "./run-document.js";

describeDocument("docs/cli.md", { section: /^## Quick start$/, notRun: [] });
