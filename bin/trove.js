#!/usr/bin/env node
// Trove runs on Node.js 22.14 or later (README.md, "Run it"). On Linux the install brings Node 24
// (node_modules/.bin/node), which `npm start`, `npm test` and `npx trove` put first on the PATH;
// an older Node running this file directly is refused here, before a native module loads.
const MINIMUM_NODE = "22.14.0";
const [major, minor] = process.versions.node.split(".").map(Number);
const [needMajor, needMinor] = MINIMUM_NODE.split(".").map(Number);
if (major < needMajor || (major === needMajor && minor < needMinor)) {
  process.stderr.write(
    `trove: Node.js ${MINIMUM_NODE} or later is needed, this is ${process.version} (${process.execPath}); ` +
      "run it through `npx trove` or `npm start`, which use the Node.js that npm install brought, or install Node.js 22 or 24\n",
  );
  process.exit(1);
}
await import("../dist/cli.js");
