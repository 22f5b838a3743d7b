// Issue 30, history in the console (docs/console.md "History"), in a real headless Chromium and a
// real headless Firefox against a real Trove: a resource's versions (time, user, size, operation),
// a version viewed, two compared side by side, one restored after a confirmation that names what
// it replaces; a folder browsed as of a moment through a deep link, and restored as it was after a
// dry-run list. Each step is checked as another client sees the store (REST).

import type { Page } from "puppeteer-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  axeViolations,
  type BrowserKind,
  type ConsoleRig,
  describeWithBrowser,
  localMomentNextYear,
  screenshot,
  signIn,
  startConsoleRig,
  tokenSubject,
} from "./browser.js";

const STORE = "kept";
const V1 = "Dear Ana,\nthank you for your order.\nKind regards\n";
const V2 = "Dear Ana,\nthank you for your second order.\nKind regards\nThe team\n";
const V3 = "Dear Ana,\nwritten by someone else meanwhile.\n";

async function texts(page: Page, selector: string): Promise<string[]> {
  return page.$$eval(selector, (els) => els.map((e) => (e.textContent ?? "").trim()));
}

for (const kind of ["chromium", "firefox"] as BrowserKind[]) {
  const name = kind === "chromium" ? "Chromium" : "Firefox";
  describeWithBrowser(kind, `console history (${name}, issue 30)`, (executable) => {
    let rig: ConsoleRig;
    let auth: Record<string, string>;
    let sub: string;
    beforeAll(async () => {
      rig = await startConsoleRig(executable, { browser: kind, viewport: { width: 1280, height: 900 } });
      const token = await rig.token();
      auth = { Authorization: `Bearer ${token}` };
      sub = tokenSubject(token);
      const store = await fetch(`${rig.url}/resources/v2/stores`, {
        method: "POST",
        headers: { ...auth, "Content-Type": "application/json" },
        body: JSON.stringify({ name: STORE, type: "recursive", settings: { "keep-versions": "30d" } }),
      });
      expect(store.status).toBe(201);
      expect((await rest("letters/", { method: "PUT" })).status).toBe(201);
      expect((await rest("letters/letter.txt", { method: "PUT", body: V1, headers: text })).status).toBe(201);
      expect((await rest("letters/letter.txt", { method: "PUT", body: V2, headers: text })).status).toBe(200);
      await signIn(rig.page, rig.url);
    }, 120_000);
    afterAll(async () => {
      await rig?.close();
    });

    const text = { "Content-Type": "text/plain" };
    const rest = (path: string, init: RequestInit = {}) =>
      fetch(`${rig.url}/resources/v2/data/${STORE}/${path}`, { ...init, headers: { ...auth, ...init.headers } });

    it("lists a resource's versions with time, user, size and operation; compares two side by side; views one", async () => {
      const { page, url } = rig;
      await page.goto(`${url}/console/browse/${STORE}/letters/`);
      await page.locator("button.link::-p-text(letter.txt)").click();
      await page.locator("dialog button::-p-text(History)").click();
      await page.waitForSelector("table.history tbody tr");
      const rows = await page.$$eval("table.history tbody tr", (trs) =>
        trs.map((tr) => [...tr.querySelectorAll("th, td")].slice(0, 4).map((c) => (c.textContent ?? "").trim())),
      );
      expect(rows).toHaveLength(2);
      // Newest first: the current one (the second write), then the first; both by the token's user.
      expect(rows[0]?.slice(1)).toEqual([sub, `${V2.length} B`, "written"]);
      expect(rows[0]?.[0]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dcurrent$/);
      expect(rows[1]?.slice(1)).toEqual([sub, `${V1.length} B`, "written"]);

      // The two newest are compared by default: the changed line beside its new text, the added one.
      await page.locator("button::-p-text(Compare Old and New)").click();
      await page.waitForSelector("table.diff tbody tr");
      expect(await texts(page, ".version-view .hint")).toEqual(["2 lines differ."]);
      const diff = await page.$$eval("table.diff tbody tr", (trs) =>
        trs.map(
          (tr) => `${tr.className}: ${[...tr.querySelectorAll("td.line")].map((td) => td.textContent).join(" | ")}`,
        ),
      );
      expect(diff).toEqual([
        "same: Dear Ana, | Dear Ana,",
        "changed: removed: thank you for your order. | added: thank you for your second order.",
        "same: Kind regards | Kind regards",
        "added:  | added: The team",
      ]);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `history-diff-${kind}`);

      // View the first version: its own text.
      await page.locator("table.history tbody tr:nth-child(2) button::-p-text(View)").click();
      await page.waitForSelector(".version-text pre");
      expect(await page.$eval(".version-text pre", (p) => p.textContent)).toBe(V1);
    });

    it("restores a version after a confirmation that names what it replaces; the store has it back as a new change", async () => {
      const { page } = rig;
      const when = await page.$eval("table.history tbody tr:nth-child(2) time", (t) => t.textContent ?? "");
      const first = await page.$eval("table.history tbody tr:nth-child(2)", (tr) => tr.getAttribute("data-tag") ?? "");
      const restoreFirst = `button[aria-label="Restore the version of ${when}, tag ${first.slice(0, 8)}"]`;
      await page.locator(restoreFirst).click();
      await page.waitForSelector("dialog[open] dialog[open] p::-p-text(becomes current again)");
      const confirmation = await page.$$eval("dialog[open] dialog[open] p", (ps) =>
        ps.map((p) => p.textContent ?? "").join(" "),
      );
      expect(confirmation).toContain(`The version of ${when} by ${sub} (${V1.length} B) becomes current again`);
      expect(confirmation).toContain(`It replaces the current version (`);
      expect(confirmation).toContain(`${V2.length} B)`);
      // Nothing changed yet.
      expect(await (await rest("letters/letter.txt")).text()).toBe(V2);
      // Someone writes meanwhile: the restore, made against the current state the confirmation named,
      // is refused with the reason, and the store keeps their change.
      expect((await rest("letters/letter.txt", { method: "PUT", body: V3, headers: text })).status).toBe(200);
      // The confirmation opens over the history (a dialog in the dialog).
      await page.locator("dialog[open] dialog[open] button.danger::-p-text(Restore)").click();
      await page.waitForSelector("dialog[open] dialog[open] [role=alert]");
      expect(await page.$eval("dialog[open] dialog[open] [role=alert]", (e) => e.textContent)).toMatch(
        /match|changed/i,
      );
      expect(await (await rest("letters/letter.txt")).text()).toBe(V3);
      await page.locator("dialog[open] dialog[open] button::-p-text(Cancel)").click();
      await page.locator("dialog button::-p-text(Close)").click();
      await page.waitForFunction(`!document.querySelector("dialog[open]")`);
      // Opened again, the history shows their change as current; the first version is restored over it.
      await page.locator("button.link::-p-text(letter.txt)").click();
      await page.locator("dialog button::-p-text(History)").click();
      await page.waitForFunction(`document.querySelectorAll("table.history tbody tr").length === 3`);
      await page.locator(restoreFirst).click();
      await page.waitForSelector("dialog[open] dialog[open] p::-p-text(becomes current again)");
      const named = await page.$$eval("dialog[open] dialog[open] p", (ps) =>
        ps.map((p) => p.textContent ?? "").join(" "),
      );
      expect(named).toContain(`${V3.length} B)`);
      await page.locator("dialog[open] dialog[open] button.danger::-p-text(Restore)").click();
      await page.waitForSelector("dialog .status::-p-text(Restored the version of)");
      expect(await (await rest("letters/letter.txt")).text()).toBe(V1);
      // The restore is a new state by the console's user; the replaced one is kept.
      await page.waitForFunction(`document.querySelectorAll("table.history tbody tr").length === 4`);
      const users = await page.$$eval("table.history tbody tr td:nth-of-type(1)", (tds) =>
        tds.map((td) => td.textContent),
      );
      expect(users).toEqual(["developer", sub, sub, sub]);
      await page.locator("dialog button::-p-text(Close)").click();
      await page.waitForFunction(`!document.querySelector("dialog[open]")`);
    });

    it("browses a folder as of a moment through a deep link, and restores it as it was after a dry-run list", async () => {
      const { page, url } = rig;
      const before = new Date().toISOString();
      // The next change is strictly later than the moment (the clock's millisecond has passed).
      while (new Date().toISOString() === before) await new Promise((r) => setTimeout(r, 1));
      expect((await rest("letters/letter.txt", { method: "DELETE" })).status).toBe(200);
      expect((await rest("letters/new.txt", { method: "PUT", body: "new", headers: text })).status).toBe(201);

      await page.goto(`${url}/console/browse/${STORE}/letters/?as-of=${encodeURIComponent(before)}`);
      await page.waitForSelector('tr[data-name="letter.txt"]');
      expect(await page.$('tr[data-name="new.txt"]')).toBeNull();
      expect(await page.$eval(".as-of-banner p", (p) => p.textContent)).toMatch(/^Showing this folder as it was at /);
      // Read-only: no write buttons, no delete; the file opens as it was.
      expect(await page.$('button[aria-label="Delete letter.txt"]')).toBeNull();
      expect(await page.$(".toolbar")).toBeNull();
      expect(await page.$("button::-p-text(New folder)")).toBeNull();
      await page.locator("button.link::-p-text(letter.txt)").click();
      await page.waitForSelector("#viewer-text");
      expect(await page.$eval("#viewer-text", (e) => (e as unknown as { value: string }).value)).toBe(V1);
      expect(await page.$("dialog button::-p-text(Save)")).toBeNull();
      await page.keyboard.press("Escape");
      await page.waitForFunction(`!document.querySelector("dialog[open]")`);
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, `as-of-${kind}`);

      await page.locator("button::-p-text(Restore this folder as it was)").click();
      await page.waitForSelector("ul.restore-plan li");
      const plan = (await texts(page, "ul.restore-plan li")).sort();
      expect(plan).toEqual(["delete /letters/new.txt", "restore /letters/letter.txt"]);
      // The dry run changed nothing.
      expect((await rest("letters/letter.txt")).status).toBe(404);
      expect((await rest("letters/new.txt")).status).toBe(200);
      await page.locator("dialog[open] button::-p-text(Restore 2 changes)").click();
      await page.waitForSelector("[role=status]::-p-text(restored as it was at event)");
      expect(new URL(page.url()).search).toBe("");
      expect(await (await rest("letters/letter.txt")).text()).toBe(V1);
      expect((await rest("letters/new.txt")).status).toBe(404);
      // Back to now: the listing shows the folder as it is, writable again.
      await page.waitForSelector('tr[data-name="letter.txt"] button[aria-label="Delete letter.txt"]');
    });

    it("the moment field opens the folder as of the moment typed, a URL that names it", async () => {
      const { page, url } = rig;
      await page.goto(`${url}/console/browse/${STORE}/letters/`);
      await page.waitForSelector("#as-of-moment");
      const moment = localMomentNextYear();
      await page.locator("#as-of-moment").fill(moment);
      await page.locator("form.as-of button::-p-text(Show)").click();
      await page.waitForSelector(".as-of-banner");
      const asOf = new URL(page.url()).searchParams.get("as-of");
      expect(asOf).toBe(new Date(moment).toISOString());
      // A moment after the last event stands for the last event: the folder as it is.
      await page.waitForSelector('tr[data-name="letter.txt"]');
      // The browser's back button returns to now.
      await page.goBack();
      await page.waitForFunction(`!document.querySelector(".as-of-banner")`);
      expect(new URL(page.url()).search).toBe("");
    });
  });
}
