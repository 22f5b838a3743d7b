// The storage port as the cores see it when metrics are on: every operation timed by name, and
// the changes that writes commit counted. Every face's write goes through the port, so this is
// where committed changes are counted, whatever face they came from.

import type { InsightsStorage, ResourceStorage, StoragePort } from "../storage/port.js";

/** What the measured port reports. */
export interface StorageObserver {
  /** One operation ended after `seconds`; `ok` false when it failed. */
  operation(name: string, seconds: number, ok: boolean): void;
  /** A write committed `count` changes (resources or directories created, replaced or deleted). */
  changed(kind: "put" | "mkdir" | "delete", count: number): void;
}

/** Operations answered by a promise (or at once, where the port allows it): timed from the call to the answer. */
const PROMISED = [
  "listStores",
  "getStore",
  "createStore",
  "updateStore",
  "deleteStore",
  "getNode",
  "getStoreNode",
  "putFile",
  "putFiles",
  "makeDirectory",
  "deleteTree",
  "writeBlob",
  "discardBlob",
  "changesSince",
  "purgeExpired",
] as const satisfies readonly (keyof StoragePort)[];

/** Operations answered by an async iterable: timed from the call to the first item (or the end). */
const ITERATED = ["listNodes", "readBlob"] as const satisfies readonly (keyof ResourceStorage)[];

const INSIGHTS_PROMISED = [
  "createProject",
  "getProject",
  "listProjects",
  "createEnvironment",
  "getEnvironment",
  "listEnvironments",
  "recordPromotion",
  "createReport",
  "getReport",
  "listReports",
  "claimReportJob",
  "updateReportJob",
] as const satisfies readonly (keyof InsightsStorage)[];

const INSIGHTS_ITERATED = [
  "listPromotions",
  "readReportDocument",
] as const satisfies readonly (keyof InsightsStorage)[];

/** Every operation name the measured port reports (the `operation` label's values). */
export const STORAGE_OPERATIONS: readonly string[] = [
  ...PROMISED,
  ...ITERATED,
  ...INSIGHTS_PROMISED,
  ...INSIGHTS_ITERATED,
];

type AnyFunction = (...args: unknown[]) => unknown;

/**
 * `storage` with its operations timed. Anything else (the backend's name, `onChange`,
 * `reportedSettings`, `close`, a method added later) passes through unmeasured, called on the
 * adapter itself.
 */
export function measuredStorage(storage: StoragePort, observer: StorageObserver): StoragePort {
  const insights = measure(storage.insights, INSIGHTS_PROMISED, INSIGHTS_ITERATED, observer);
  const committed = (name: string, result: unknown) => {
    if (name === "putFile") observer.changed("put", 1);
    else if (name === "putFiles") {
      const written = (result as ({ result: unknown } | { error: unknown })[]).filter((r) => "result" in r).length;
      if (written > 0) observer.changed("put", written);
    } else if (name === "makeDirectory") {
      // An existing directory answers without a change.
      if ((result as { created: boolean }).created) observer.changed("mkdir", 1);
    } else if (name === "deleteTree") observer.changed("delete", (result as { count: number }).count);
  };
  return measure(storage, PROMISED, ITERATED, observer, committed, { insights });
}

/**
 * `target` with the named methods replaced by timed ones, and `replaced` members; every method is
 * called with `target` as `this`, so an adapter's private state stays its own.
 */
function measure<T extends object>(
  target: T,
  promised: readonly string[],
  iterated: readonly string[],
  observer: StorageObserver,
  committed?: (name: string, result: unknown) => void,
  replaced: Record<string, unknown> = {},
): T {
  const own = new Map<string | symbol, unknown>(Object.entries(replaced));
  for (const name of promised) {
    const method = (target as Record<string, AnyFunction | undefined>)[name];
    // An optional operation the adapter has not (putFiles) stays absent.
    if (method === undefined) continue;
    own.set(name, (...args: unknown[]) => {
      const started = performance.now();
      let answer: unknown;
      try {
        answer = method.apply(target, args);
      } catch (err) {
        observer.operation(name, (performance.now() - started) / 1000, false);
        throw err;
      }
      // An operation the adapter answered at once (SQLite's getStoreNode) stays synchronous.
      if (!(answer instanceof Promise)) {
        observer.operation(name, (performance.now() - started) / 1000, true);
        committed?.(name, answer);
        return answer;
      }
      return answer.then(
        (result) => {
          observer.operation(name, (performance.now() - started) / 1000, true);
          committed?.(name, result);
          return result;
        },
        (err: unknown) => {
          observer.operation(name, (performance.now() - started) / 1000, false);
          throw err;
        },
      );
    });
  }
  for (const name of iterated) {
    const method = (target as Record<string, AnyFunction>)[name] as AnyFunction;
    own.set(name, (...args: unknown[]) =>
      timedFirst(name, method.apply(target, args) as AsyncIterable<unknown>, observer),
    );
  }
  // The proxy's own target is an empty object: a proxy must return a target's read-only,
  // non-configurable property as it is, and the measured methods are exactly such replacements
  // when an adapter (or a test's wrapper of one) defines its methods that way.
  return new Proxy({} as T, {
    get(_, property) {
      if (own.has(property)) return own.get(property);
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      const bound = (value as AnyFunction).bind(target);
      own.set(property, bound);
      return bound;
    },
    set: (_, property, value) => Reflect.set(target, property, value, target),
    has: (_, property) => property in target,
    getPrototypeOf: () => Object.getPrototypeOf(target),
  });
}

/** An iterable that reports the time to its first item (or its end, or its failure) once. */
function timedFirst<T>(name: string, source: AsyncIterable<T>, observer: StorageObserver): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const started = performance.now();
      const iterator = source[Symbol.asyncIterator]();
      let reported = false;
      const report = (ok: boolean) => {
        if (reported) return;
        reported = true;
        observer.operation(name, (performance.now() - started) / 1000, ok);
      };
      return {
        next: () =>
          iterator.next().then(
            (result) => {
              report(true);
              return result;
            },
            (err: unknown) => {
              report(false);
              throw err;
            },
          ),
        return: (value?: unknown) => iterator.return?.(value) ?? Promise.resolve({ done: true, value: undefined }),
        throw: (err?: unknown) => iterator.throw?.(err) ?? Promise.reject(err),
      } as AsyncIterator<T>;
    },
  };
}
