// README.md's blocks, run top to bottom against a fresh server (run-document.ts, snippets.ts).

import { describeDocument } from "./run-document.js";

describeDocument("README.md", {
  notRun: [
    [/^npm (install|start)\b/m, "installs Trove and starts its server (the test starts one itself)"],
    [/^docker run/m, "needs Docker and MongoDB"],
    [/--issuer https:\/\/login\.example\.com/, "needs an external token issuer"],
    [/^npm test\b/m, "the development commands: CI runs them"],
  ],
});
