// Parked long polls (issue 14, A and B): a parked poll holds no timer of its own, still answers a
// change, and answers 204 at its own deadline, whatever the deadlines of the others.

import { afterEach, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function lastEventId(url: string): Promise<number> {
  const text = await (await fetch(`${url}/resources/v2/poll`)).text();
  return Number(/^RESET home (\d+)$/m.exec(text)?.[1]);
}

describe("parked polls", () => {
  it("issue 14 A: 200 parked polls hold one timer between them; a change answers every one of them, then none is left", async () => {
    t = await startServer({ pollWait: 60_000 });
    const { url, server } = t;
    const last = await lastEventId(url);
    const polls = Array.from({ length: 200 }, () =>
      fetch(`${url}/resources/v2/poll?store=home:${last}&wait=60`).then(async (r) => ({
        status: r.status,
        text: await r.text(),
      })),
    );
    await until(() => server.notifier.waiterCount === 200, "200 parked polls");
    expect(server.notifier.timerCount).toBe(1);
    const put = await fetch(`${url}/resources/v2/data/home/parked.txt`, { method: "PUT", body: "x" });
    expect(put.status).toBe(201);
    for (const answer of await Promise.all(polls)) {
      expect(answer.status).toBe(200);
      expect(answer.text).toMatch(new RegExp(`^CHANGE\\|${last + 1}\\|idr://home/parked.txt\\|modify\\|`, "m"));
    }
    await until(() => server.notifier.waiterCount === 0, "waiters to be released");
    expect(server.notifier.timerCount).toBe(0);
  }, 60_000);

  it("issue 14 A: polls with different waits each answer 204 at their own deadline, the longest after the shorter ones", async () => {
    t = await startServer({ pollWait: 60_000 });
    const { url, server } = t;
    const last = await lastEventId(url);
    const order: string[] = [];
    const poll = (wait: string) =>
      fetch(`${url}/resources/v2/poll?store=home:${last}&wait=${wait}`).then(async (r) => {
        order.push(wait);
        return { status: r.status, text: await r.text() };
      });
    // Armed longest first: the shorter deadlines come before it in the heap.
    const long = poll("30");
    await until(() => server.notifier.waiterCount === 1, "the long poll");
    const short = [poll("0.2"), poll("0.4")];
    for (const answer of await Promise.all(short)) expect(answer).toEqual({ status: 204, text: "" });
    expect(order).toEqual(["0.2", "0.4"]);
    // The long poll is still parked, and its wait still ends with a change.
    expect(server.notifier.waiterCount).toBe(1);
    expect(server.notifier.timerCount).toBe(1);
    await fetch(`${url}/resources/v2/data/home/late.txt`, { method: "PUT", body: "y" });
    const answer = await long;
    expect(answer.status).toBe(200);
    expect(answer.text).toContain("idr://home/late.txt|modify");
  }, 60_000);

  it("issue 14 A: a client that goes away releases its waiter and the timer with it", async () => {
    t = await startServer({ pollWait: 60_000 });
    const { url, server } = t;
    const last = await lastEventId(url);
    const controller = new AbortController();
    const poll = fetch(`${url}/resources/v2/poll?store=home:${last}&wait=60`, { signal: controller.signal }).catch(
      (err: Error) => err.name,
    );
    await until(() => server.notifier.waiterCount === 1, "the parked poll");
    expect(server.notifier.timerCount).toBe(1);
    controller.abort();
    expect(await poll).toBe("AbortError");
    await until(() => server.notifier.waiterCount === 0, "the waiter to be released");
    expect(server.notifier.timerCount).toBe(0);
  }, 60_000);
});
