// The published package as a user gets it: `npm pack` of sdk/, installed from the
// tarball into an empty project (no workspace links), then used against a running
// Trove: the REST client, createTroveClient over gRPC, mirror, the `trove` bin,
// and its type declarations through the exports map.

import { execFile } from "node:child_process";
import { lstat, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt, ROOT, SDK } from "./build.js";

const run = promisify(execFile);
const NPM_ENV = {
  ...process.env,
  npm_config_audit: "false",
  npm_config_fund: "false",
  npm_config_update_notifier: "false",
};

const USE = `
import { createRestClient, createTroveClient, isDeletedError } from "@trove/sdk";
import { parseFeedLine } from "@trove/sdk/rest";
import { mirror } from "@trove/sdk/mirror";
import { readFile } from "node:fs/promises";

const url = process.env.TROVE_URL;
const rest = createRestClient({ baseUrl: url });
await rest.mkdir("home", "packed");
const put = await rest.put("home", "packed/a.txt", "from the tarball", { contentType: "text/plain" });
const got = await rest.get("home", "packed/a.txt", { as: "text" });
await rest.put("home", "packed/gone.txt", "x");
await rest.delete("home", "packed/gone.txt");
const deleted = await rest.get("home", "packed/gone.txt").catch((e) => isDeletedError(e));
const grpc = createTroveClient({ baseUrl: url, protocol: "grpc" });
const { resource } = await grpc.resources.stat({ store: "home", path: "packed/a.txt" });
grpc.close();
const m = mirror({ client: rest, store: "home", path: "packed", target: process.argv[2], once: true });
await m.done;
console.log(JSON.stringify({
  putTag: put.tag,
  text: got.body,
  deleted,
  grpcTag: resource.tag,
  mirrored: await readFile(process.argv[2] + "/a.txt", "utf8"),
  parsed: parseFeedLine("RESET home 3"),
}));
`;

const TYPED = `
import { createRestClient, type ListingEntry, type TroveClient, createTroveClient } from "@trove/sdk";
import { type MirrorEvent } from "@trove/sdk/mirror";
import { EXIT } from "@trove/sdk/cli";
const rest = createRestClient({ baseUrl: "http://127.0.0.1:1" });
export const entries: Promise<ListingEntry[]> = rest.list("home", "").then((l) => l.entries);
export const client: TroveClient = createTroveClient({ baseUrl: "http://127.0.0.1:1", protocol: "grpc-web" });
export const event: MirrorEvent = { type: "idle", eventId: 1 };
export const notFound: number = EXIT.notFound;
`;

describe("npm pack of @trove/sdk", () => {
  let server: TestServer;
  let work: string;

  beforeAll(async () => {
    await ensureSdkBuilt();
    work = await mkdtemp(join(tmpdir(), "trove-pack-"));
    server = await startServer();
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("installs from the tarball into an empty project and works against a running Trove", async () => {
    // --ignore-scripts: dist/ is already built (by ensureSdkBuilt) and `prepack` would rebuild it.
    await run("npm", ["pack", "--ignore-scripts", "--pack-destination", work], { cwd: SDK, env: NPM_ENV });
    const [tarball] = (await readdir(work)).filter((f) => f.endsWith(".tgz"));
    expect(tarball).toBe("trove-sdk-0.1.0.tgz");
    const { stdout: listing } = await run("tar", ["-tzf", join(work, tarball as string)]);
    const files = listing.trim().split("\n");
    expect(files).toContain("package/bin/trove.js");
    expect(files).toContain("package/dist/index.d.ts");
    expect(files).toContain("package/dist/cli/main.js");
    expect(files.some((f) => f.startsWith("package/src/"))).toBe(false);
    // The license text ships (Apache-2.0, as package.json says), and no script runs in a consumer's
    // install: dist/ is built before packing (prepack), never by the consumer.
    expect(files).toContain("package/LICENSE");
    const { stdout: license } = await run("tar", ["-xzOf", join(work, tarball as string), "package/LICENSE"]);
    expect(license).toContain("Apache License\n                           Version 2.0, January 2004");
    const { stdout: manifest } = await run("tar", ["-xzOf", join(work, tarball as string), "package/package.json"]);
    const packed = JSON.parse(manifest) as { license: string; scripts?: Record<string, string> };
    expect(packed.license).toBe("Apache-2.0");
    const installScripts = ["preinstall", "install", "postinstall", "prepare", "preprepare", "postprepare"];
    expect(Object.keys(packed.scripts ?? {}).filter((s) => installScripts.includes(s))).toEqual([]);

    const project = join(work, "project");
    await run("mkdir", ["-p", project]);
    await writeFile(join(project, "package.json"), JSON.stringify({ name: "user", private: true, type: "module" }));
    await run("npm", ["install", "--prefer-offline", "--no-package-lock", join(work, tarball as string)], {
      cwd: project,
      env: NPM_ENV,
      timeout: 170_000,
    });
    const installed = await lstat(join(project, "node_modules", "@trove", "sdk"));
    expect(installed.isSymbolicLink()).toBe(false);
    expect(installed.isDirectory()).toBe(true);

    await writeFile(join(project, "use.mjs"), USE);
    const { stdout } = await run(process.execPath, ["use.mjs", join(work, "mirror")], {
      cwd: project,
      env: { ...process.env, TROVE_URL: server.url },
    });
    const result = JSON.parse(stdout) as Record<string, unknown>;
    expect(result).toMatchObject({
      text: "from the tarball",
      deleted: true,
      mirrored: "from the tarball",
      parsed: { kind: "reset", store: "home", eventId: 3 },
    });
    expect(result.grpcTag).toBe(result.putTag);

    const bin = join(project, "node_modules", ".bin", "trove");
    const ls = await run(bin, ["ls", "-r", "home/packed"], {
      cwd: project,
      env: { PATH: process.env.PATH, HOME: work, TROVE_URL: server.url },
    });
    expect(ls.stdout).toBe("a.txt\n");
    const serve = await run(bin, ["serve"], { cwd: project, env: { PATH: process.env.PATH, HOME: work } }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(serve).toMatchObject({ code: 2 });
    expect((serve as { stderr: string }).stderr).toContain("the server is not part of @trove/sdk");

    // The declarations resolve through the exports map for a TypeScript user.
    await writeFile(join(project, "typed.ts"), TYPED);
    await writeFile(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "NodeNext",
          moduleResolution: "NodeNext",
          target: "ES2022",
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ["node"],
          typeRoots: [join(ROOT, "node_modules", "@types")],
        },
        files: ["typed.ts"],
      }),
    );
    await run(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", project], {
      cwd: project,
    }).catch((e: { stdout: string }) => {
      throw new Error(`tsc failed on the installed package:\n${e.stdout}`);
    });
    const pkg = JSON.parse(await readFile(join(project, "node_modules", "@trove", "sdk", "package.json"), "utf8"));
    expect(Object.keys(pkg.dependencies).sort()).toEqual([
      "@bufbuild/protobuf",
      "@connectrpc/connect",
      "@connectrpc/connect-node",
      "fast-xml-parser",
    ]);
  }, 180_000);
});
