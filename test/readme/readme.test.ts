// README.md's blocks, run top to bottom against a fresh server (run-document.ts, snippets.ts).

import { describeDocument } from "./run-document.js";

describeDocument("README.md", {
  notRun: [
    [/^npm (install|start)\b/m, "installs Trove and starts its server (the test starts one itself)"],
    [/--issuer https:\/\/login\.example\.com/, "needs an external token issuer (and, for MongoDB, Docker)"],
    [/^npm test\b/m, "the development commands: CI runs them"],
  ],
});
