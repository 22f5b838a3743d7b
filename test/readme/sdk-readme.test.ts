// sdk/README.md's blocks, run top to bottom against a fresh server (run-document.ts, snippets.ts).

import { describeDocument } from "./run-document.js";

describeDocument("sdk/README.md", {
  notRun: [
    [/npm pack/, "packs the SDK and installs it into another project (test/sdk/pack.test.ts does)"],
    [/completion bash/, "loads completion into interactive shells (test/sdk/completion.test.ts checks the scripts)"],
  ],
});
