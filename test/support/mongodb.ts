// The MongoDB server of the suites that need one: TROVE_TEST_MONGODB_URL (.ci/run starts FerretDB
// and sets it), or a FerretDB of a suite's own (ferretdb.ts). As with a missing tool (tools.ts),
// a suite whose database is missing fails under CI=true, saying what to set and how to get it;
// elsewhere it is reported as skipped, with the reason.

import { FERRETDB_BIN } from "./ferretdb.js";
import { cachePath, describeWithNeed, describeWithTool, FERRETDB, installHint } from "./tools.js";

/** The MongoDB server the suites share (a fresh database each), when one is given. */
export const MONGODB_URL = process.env.TROVE_TEST_MONGODB_URL || undefined;

/** What to do when TROVE_TEST_MONGODB_URL is not set. */
export const MONGODB_URL_HINT =
  "TROVE_TEST_MONGODB_URL is not set: this suite needs a MongoDB server (FerretDB v1.24.2 will do). " +
  "`bash .ci/run` builds FerretDB, starts it and sets the variable. By hand: `bash .ci/build-ferretdb` " +
  `builds it into ${cachePath(FERRETDB)}; start it with \`${cachePath(FERRETDB)} --handler=sqlite ` +
  "--sqlite-url=file:/tmp/ferretdb/ --state-dir=/tmp/ferretdb --listen-addr=127.0.0.1:27017 --debug-addr=- " +
  "--telemetry=disable` (mkdir /tmp/ferretdb first) and run the tests with " +
  'TROVE_TEST_MONGODB_URL=mongodb://127.0.0.1:27017/ (docs/mongodb.md, "Testing against a real server")';

/** `describe(title, body)` with the URL of the MongoDB server the suites share (see describeWithNeed). */
export function describeWithMongoDb(title: string, body: (url: string) => void): void {
  describeWithNeed("TROVE_TEST_MONGODB_URL", MONGODB_URL, MONGODB_URL_HINT, title, body);
}

/** `describe(title, body)` with the FerretDB binary, for a suite that starts, stops and kills its own. */
export function describeWithFerretDb(title: string, body: (bin: string) => void): void {
  describeWithTool(FERRETDB, title, body);
}

/**
 * `describe(title, body)` for a suite that runs on the shared server when there is one (`url`),
 * else on a FerretDB of its own (`url` undefined); missing only when neither is there.
 */
export function describeWithMongoDbOrFerretDb(title: string, body: (url: string | undefined) => void): void {
  describeWithNeed(
    "TROVE_TEST_MONGODB_URL or TROVE_TEST_FERRETDB_BIN",
    MONGODB_URL ?? FERRETDB_BIN,
    `${MONGODB_URL_HINT}. Or let the suite start FerretDB itself: ${installHint(FERRETDB)}`,
    title,
    () => body(MONGODB_URL),
  );
}
