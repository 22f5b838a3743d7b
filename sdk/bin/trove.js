#!/usr/bin/env node
// The `trove` client command of @trove/sdk (trove --help).
import { run } from "../dist/cli/main.js";

const code = await run(process.argv.slice(2));
// Let stdout drain before exiting (a pipe may be slower than the command).
process.stdout.write("", () => process.exit(code));
