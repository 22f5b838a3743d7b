// What the console's end-to-end suites share: the browser they drive (the Debian package
// `chromium` over CDP, or `firefox-esr` over WebDriver BiDi; found through TROVE_TEST_CHROMIUM_BIN /
// TROVE_TEST_FIREFOX_BIN or the standard paths; never downloaded), the built console (rebuilt when
// console/ is newer), a real Trove with its development issuer, and axe-core's accessibility check.

import { execFile } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type Browser, launch, type Page } from "puppeteer-core";
import { describe, it } from "vitest";
import { type DevIssuer, openDevIssuer } from "../../src/auth/dev-issuer.js";
import { startServer, type TestServer } from "../support/server.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The browsers the suites drive: the Debian packages `chromium` and `firefox-esr`, never a download. */
export type BrowserKind = "chromium" | "firefox";

const BROWSERS: Record<BrowserKind, { title: string; env: string; paths: string[]; names: string[]; debian: string }> =
  {
    chromium: {
      title: "Chromium",
      env: "TROVE_TEST_CHROMIUM_BIN",
      paths: ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/snap/bin/chromium"],
      names: ["chromium", "chromium-browser", "google-chrome"],
      debian: "chromium",
    },
    firefox: {
      title: "Firefox",
      env: "TROVE_TEST_FIREFOX_BIN",
      paths: ["/usr/bin/firefox", "/usr/bin/firefox-esr", "/snap/bin/firefox"],
      names: ["firefox", "firefox-esr"],
      debian: "firefox-esr",
    },
  };
export const CHROMIUM_ENV = BROWSERS.chromium.env;
export const FIREFOX_ENV = BROWSERS.firefox.env;

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The browser: the environment variable's, else a standard path, else one on PATH; undefined if none. */
export function findBrowser(kind: BrowserKind): string | undefined {
  const { env, paths, names } = BROWSERS[kind];
  const named = process.env[env];
  if (named) return executable(named) ? named : undefined;
  const standard = paths.find(executable);
  if (standard) return standard;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    for (const name of names) if (dir && executable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

export function findChromium(): string | undefined {
  return findBrowser("chromium");
}

function hint(kind: BrowserKind): string {
  const { title, env, paths, debian } = BROWSERS[kind];
  return (
    `no ${title} is installed (${env}, ${paths.join(", ")}, PATH): ` +
    `install the Debian package with \`apt-get install -y ${debian}\` (.ci/run does), or name one in ` +
    `${env}. The console's end-to-end tests never download a browser.`
  );
}

/**
 * `describe` with the browser's path. Without a browser: under CI=true one failing test says so;
 * elsewhere the suite is reported as not run, with the reason in its title and on stderr.
 */
export function describeWithBrowser(kind: BrowserKind, title: string, body: (path: string) => void): void {
  const path = findBrowser(kind);
  if (path !== undefined) {
    describe(title, () => body(path));
    return;
  }
  const { title: name } = BROWSERS[kind];
  if (process.env.CI === "true") {
    describe(title, () => {
      it(`needs ${name}`, () => {
        throw new Error(hint(kind));
      });
    });
    return;
  }
  console.warn(`${title}: NOT RUN: ${hint(kind)}`);
  describe.skip(`${title} (NOT RUN: no ${name} installed)`, () => body(""));
}

export function describeWithChromium(title: string, body: (path: string) => void): void {
  describeWithBrowser("chromium", title, body);
}

export function describeWithFirefox(title: string, body: (path: string) => void): void {
  describeWithBrowser("firefox", title, body);
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

export interface RigOptions {
  /** Chromium (over CDP) by default; Firefox over WebDriver BiDi. */
  browser?: BrowserKind;
  /** The page's size; 1280 x 900 by default. */
  viewport?: { width: number; height: number };
}

/** A real Trove (development issuer, console) on 127.0.0.1:0 and a headless browser with one page. */
export async function startConsoleRig(executablePath: string, options: RigOptions = {}): Promise<ConsoleRig> {
  const kind = options.browser ?? "chromium";
  const viewport = options.viewport ?? { width: 1280, height: 900 };
  await buildConsole();
  const issuerDir = await mkdtemp(join(tmpdir(), "trove-console-issuer-"));
  const issuer = await openDevIssuer({ dataDir: issuerDir });
  const trove = await startServer({ auth: issuer.authenticator, devIssuer: issuer });
  let browser: Browser | undefined;
  try {
    browser =
      kind === "firefox"
        ? // puppeteer-core drives Firefox over WebDriver BiDi (its only protocol for Firefox).
          await launch({ browser: "firefox", executablePath, headless: true, defaultViewport: viewport })
        : await launch({
            browser: "chrome",
            executablePath,
            headless: true,
            // As root (CI containers) Chromium refuses to start without --no-sandbox.
            args: [
              "--no-sandbox",
              "--disable-dev-shm-usage",
              "--disable-gpu",
              `--window-size=${viewport.width},${viewport.height}`,
            ],
            defaultViewport: viewport,
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
export async function signedInRig(
  executablePath: string,
  options: RigOptions = {},
): Promise<{ rig: ConsoleRig; auth: Record<string, string> }> {
  const rig = await startConsoleRig(executablePath, options);
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

/** axe-core, from node_modules (never a CDN). */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/**
 * axe-core's violations on the page as it is now, of every impact, minor included (WCAG 2.x A and
 * AA and axe's best practices; issue 30: "no violation on any screen"), one line each: rule,
 * impact, help, the first elements concerned.
 */
export async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated by the driver rather than added as a <script>: the console's CSP allows no inline script.
  await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    interface Violation {
      id: string;
      impact?: string | null;
      help: string;
      nodes: { target: unknown[] }[];
    }
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: Violation[] }> } }).axe;
    const { violations } = await axe.run();
    return violations.map(
      (v) =>
        `${v.id} (${v.impact}): ${v.help}: ${v.nodes
          .slice(0, 5)
          .map((n) => n.target.join(" "))
          .join(", ")}${v.nodes.length > 5 ? ` and ${v.nodes.length - 5} more` : ""}`,
    );
  });
}

/** The page's width as it scrolls (document.documentElement.scrollWidth): over the window's, something overflows. */
export async function scrollWidth(page: Page): Promise<number> {
  return page.evaluate("document.documentElement.scrollWidth") as Promise<number>;
}

/** The elements that reach past the window's right edge (tag.class), for a failing width check's message. */
export async function overflowing(page: Page): Promise<string[]> {
  return page.evaluate(`[...document.querySelectorAll("body *")]
    .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
    .slice(0, 12)
    .map((e) => e.tagName.toLowerCase() + (e.className && typeof e.className === "string" ? "." + e.className.trim().replace(/\\s+/g, ".") : "") + " " + Math.round(e.getBoundingClientRect().right))`) as Promise<
    string[]
  >;
}

/** The subject (`sub`) of a JWT: the user history records and the console's header names. */
export function tokenSubject(token: string): string {
  return (JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString()) as { sub: string }).sub;
}

/** Whether the dependency graph's drawing lies whole within its frame ("fit all"). */
export async function graphFitsFrame(page: Page): Promise<boolean> {
  return page.$eval(".graph-canvas", (frame) => {
    const svg = frame.querySelector("svg") as unknown as { getAttribute(n: string): string };
    return (
      Number(svg.getAttribute("width")) <= frame.clientWidth && Number(svg.getAttribute("height")) <= frame.clientHeight
    );
  });
}

/**
 * A moment a year from now as a `datetime-local` field's value (the browser's zone, which is this
 * process's): later than every event of the test, so it stands for the store's last event.
 */
export function localMomentNextYear(): string {
  const d = new Date(Date.now() + 365 * 86_400_000);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
