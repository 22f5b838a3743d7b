// What the console's end-to-end suites share: the Chromium they drive (the Debian package
// `chromium`, found through TROVE_TEST_CHROMIUM_BIN or the standard paths; never downloaded), the
// built console (rebuilt when console/ is newer), and a real Trove with its development issuer.

import { execFile } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type Browser, launch, type Page } from "puppeteer-core";
import { describe, it } from "vitest";
import { type DevIssuer, openDevIssuer } from "../../src/auth/dev-issuer.js";
import { startServer, type TestServer } from "../support/server.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const CHROMIUM_ENV = "TROVE_TEST_CHROMIUM_BIN";
const STANDARD_PATHS = [
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome",
  "/snap/bin/chromium",
];
const NAMES = ["chromium", "chromium-browser", "google-chrome"];

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The browser: the environment variable's, else a standard path, else one on PATH; undefined if none. */
export function findChromium(): string | undefined {
  const named = process.env[CHROMIUM_ENV];
  if (named) return executable(named) ? named : undefined;
  const standard = STANDARD_PATHS.find(executable);
  if (standard) return standard;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    for (const name of NAMES) if (dir && executable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

const HINT =
  `no Chromium is installed (${CHROMIUM_ENV}, ${STANDARD_PATHS.join(", ")}, PATH): ` +
  "install the Debian package with `apt-get install -y chromium` (.ci/run does), or name one in " +
  `${CHROMIUM_ENV}. The console's end-to-end tests never download a browser.`;

/**
 * `describe` with the browser's path. Without a browser: under CI=true one failing test says so;
 * elsewhere the suite is reported as not run, with the reason in its title and on stderr.
 */
export function describeWithChromium(title: string, body: (path: string) => void): void {
  const path = findChromium();
  if (path !== undefined) {
    describe(title, () => body(path));
    return;
  }
  if (process.env.CI === "true") {
    describe(title, () => {
      it("needs Chromium", () => {
        throw new Error(HINT);
      });
    });
    return;
  }
  console.warn(`${title}: NOT RUN: ${HINT}`);
  describe.skip(`${title} (NOT RUN: no Chromium installed)`, () => body(""));
}

async function newestIn(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, (await stat(join(entry.parentPath, entry.name))).mtimeMs);
  }
  return newest;
}

/** Builds dist/console/ (npm run build:console's vite step) when console/ or the SDK's descriptors changed since. */
export async function buildConsole(): Promise<void> {
  const built = await stat(join(ROOT, "dist", "console", "index.html")).then(
    (s) => s.mtimeMs,
    () => 0,
  );
  const sources = Math.max(await newestIn(join(ROOT, "console")), await newestIn(join(ROOT, "sdk", "src", "gen")));
  if (built > sources) return;
  const vite = join(ROOT, "node_modules", "vite", "bin", "vite.js");
  await promisify(execFile)(process.execPath, [vite, "build", "console", "--logLevel", "warn"], { cwd: ROOT });
}

export interface ConsoleRig {
  trove: TestServer;
  issuer: DevIssuer;
  browser: Browser;
  page: Page;
  /** http://127.0.0.1:PORT */
  url: string;
  /** A token for calls from outside the page (the test's own REST requests). */
  token(): Promise<string>;
  close(): Promise<void>;
}

/** A real Trove (development issuer, console) on 127.0.0.1:0 and a headless Chromium with one page. */
export async function startConsoleRig(chromium: string): Promise<ConsoleRig> {
  await buildConsole();
  const issuerDir = await mkdtemp(join(tmpdir(), "trove-console-issuer-"));
  const issuer = await openDevIssuer({ dataDir: issuerDir });
  const trove = await startServer({ auth: issuer.authenticator, devIssuer: issuer });
  let browser: Browser | undefined;
  try {
    browser = await launch({
      executablePath: chromium,
      headless: true,
      // As root (CI containers) Chromium refuses to start without --no-sandbox.
      args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"],
      defaultViewport: { width: 1280, height: 900 },
    });
    const page = await browser.newPage();
    page.setDefaultTimeout(20_000);
    const open = browser;
    return {
      trove,
      issuer,
      browser: open,
      page,
      url: trove.url,
      token: () => issuer.issue(),
      async close() {
        await open.close();
        await trove.stop();
        await rm(issuerDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await browser?.close();
    await trove.stop();
    await rm(issuerDir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Saves a screenshot as test-results/console/console-NAME.png (ignored by git), or as the
 * documentation's docs/images/console-NAME.png when TROVE_UPDATE_SCREENSHOTS=1.
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  const dir =
    process.env.TROVE_UPDATE_SCREENSHOTS === "1" ? join(ROOT, "docs", "images") : join(ROOT, "test-results", "console");
  await mkdir(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `console-${name}.png`) as `${string}.png` });
}

/**
 * A rig signed in through the development issuer's page, with `auth`, the Authorization header of
 * a token of the same issuer, for REST calls from outside the page.
 */
export async function signedInRig(chromium: string): Promise<{ rig: ConsoleRig; auth: Record<string, string> }> {
  const rig = await startConsoleRig(chromium);
  const auth = { Authorization: `Bearer ${await rig.token()}` };
  await signIn(rig.page, rig.url);
  return { rig, auth };
}

/** Signs in through the development issuer's page: Sign in, then "Sign in as developer". */
export async function signIn(page: Page, url: string): Promise<void> {
  await page.goto(`${url}/`);
  await page.locator("button::-p-text(Sign in)").click();
  await page.waitForSelector("form[action='/auth/authorize']");
  await Promise.all([page.waitForNavigation(), page.locator("button::-p-text(Sign in as developer)").click()]);
  await page.waitForSelector("header.top");
}
