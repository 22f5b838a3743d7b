// Health and readiness: whether this instance can serve. It serves while its storage answers a
// trivial request (StoragePort.ping, polled every few seconds and on demand by /readyz) and until
// shutdown begins; from then on it never serves again. Answered without a token by GET /healthz
// (the process serves), GET /readyz (ready or not, with the reason) and the standard gRPC health
// service grpc.health.v1.Health (docs/operations.md, "Health and readiness").

import { Code, ConnectError } from "@connectrpc/connect";
import {
  Health as HealthService,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "@trove/sdk/gen/grpc/health/v1/health_pb.js";
import type { Logger } from "pino";
import { type RestRequest, type RestResponse, sendText } from "../rest/http.js";
import { dropUnreadBody } from "../rpc/refusals.js";
import { abortedCallError } from "../services/call-end.js";
import type { StoragePort } from "../storage/port.js";
import type { OpenRoute, OpenServices } from "./faces.js";

export interface HealthOptions {
  storage: StoragePort;
  logger: Logger;
  /** How often the storage is pinged while nobody asks, in milliseconds (default 5 s). */
  interval?: number;
}

export const DEFAULT_HEALTH_INTERVAL = 5000;

/** The reason readiness gives once shutdown has begun. */
export const SHUTTING_DOWN = "the server is shutting down";

/** Whether this instance serves, and why not; listeners hear every change. */
export class Health {
  private serving = true;
  private why = "";
  private shuttingDown = false;
  private timer: NodeJS.Timeout | undefined;
  private pinging: Promise<void> | undefined;
  private readonly listeners = new Set<() => void>();
  private readonly storage: StoragePort;
  private readonly logger: Logger;
  private readonly interval: number;

  constructor(options: HealthOptions) {
    this.storage = options.storage;
    this.logger = options.logger;
    this.interval = options.interval ?? DEFAULT_HEALTH_INTERVAL;
  }

  /** True while the storage answers and shutdown has not begun. */
  get isServing(): boolean {
    return this.serving;
  }

  /** Why it does not serve ("" while it serves). */
  get reason(): string {
    return this.why;
  }

  /** Starts the periodic check (the first one at once). */
  start(): void {
    if (this.timer || this.shuttingDown) return;
    this.timer = setInterval(() => void this.check(), this.interval);
    this.timer.unref();
    void this.check();
  }

  /** Pings the storage now (one ping at a time: callers meanwhile share it) and updates the state. */
  check(): Promise<void> {
    if (this.shuttingDown) return Promise.resolve();
    this.pinging ??= this.storage
      .ping()
      .then(
        () => this.set(true, ""),
        (err: Error) => this.set(false, `storage unavailable: ${err.message}`),
      )
      .finally(() => {
        this.pinging = undefined;
      });
    return this.pinging;
  }

  /** Shutdown began: not serving from now on, whatever the storage says. */
  shutdown(): void {
    this.stop();
    this.shuttingDown = true;
    this.set(false, SHUTTING_DOWN);
  }

  /** Stops the periodic check. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Calls `listener` after every change of the state; returns its removal. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private set(serving: boolean, reason: string): void {
    if (this.shuttingDown && serving) return;
    if (serving === this.serving && reason === this.why) return;
    const was = this.serving;
    this.serving = serving;
    this.why = reason;
    if (was && !serving && !this.shuttingDown) this.logger.warn({ reason }, "not ready");
    if (!was && serving) this.logger.info("ready again: the storage answers");
    for (const listener of [...this.listeners]) listener();
  }
}

const PROBE_HEADERS = { "Cache-Control": "no-store" };

function probe(answer: (req: RestRequest, res: RestResponse) => void): OpenRoute {
  return (req, res) => {
    if (req.method !== "GET" && req.method !== "HEAD") {
      dropUnreadBody(req, res);
      sendText(res, 405, `${req.method} is not supported here: use GET`, { Allow: "GET, HEAD", ...PROBE_HEADERS });
      return;
    }
    answer(req, res);
  };
}

/** GET /healthz (liveness: the process serves HTTP) and GET /readyz (readiness: it can serve requests). */
export function healthRoutes(health: Health): Array<[string, OpenRoute]> {
  return [
    ["/healthz", probe((_req, res) => sendText(res, 200, "ok", PROBE_HEADERS))],
    [
      "/readyz",
      probe((_req, res) => {
        void health.check().then(() => {
          if (health.isServing) sendText(res, 200, "ready", PROBE_HEADERS);
          else sendText(res, 503, `not ready: ${health.reason}`, PROBE_HEADERS);
        });
      }),
    ],
  ];
}

/**
 * grpc.health.v1.Health for the empty service name (the server as a whole) and each of `services`;
 * every one has the server's status. Check of another name is NOT_FOUND;
 * Watch of another name sends SERVICE_UNKNOWN and stays open, as the protocol says. A Watch sends
 * the status at once and then each change; once shutdown begins it sends NOT_SERVING and ends with
 * UNAVAILABLE, so that the client looks for another instance.
 */
export function healthService(health: Health, services: readonly { typeName: string }[]): OpenServices {
  const known = new Set(["", ...services.map((s) => s.typeName)]);
  const status = () => (health.isServing ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
  return (router) => {
    router.service(HealthService, {
      check(req) {
        if (!known.has(req.service)) throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
        return { status: status() };
      },
      list() {
        return { statuses: Object.fromEntries([...known].map((name) => [name, { status: status() }])) };
      },
      async *watch(req, ctx) {
        if (!known.has(req.service)) {
          yield { status: ServingStatus.SERVICE_UNKNOWN };
          await new Promise<void>((resolve) => {
            if (ctx.signal.aborted) resolve();
            else ctx.signal.addEventListener("abort", () => resolve(), { once: true });
          });
          throw abortedCallError(ctx);
        }
        let sent: ServingStatus | undefined;
        for (;;) {
          let wake!: () => void;
          const changed = new Promise<void>((resolve) => {
            wake = resolve;
          });
          const off = health.onChange(wake);
          const abort = () => wake();
          ctx.signal.addEventListener("abort", abort, { once: true });
          try {
            const now = status();
            if (now !== sent) {
              sent = now;
              yield { status: now };
            }
            if (health.reason === SHUTTING_DOWN) {
              throw new ConnectError(`${SHUTTING_DOWN}: connect to another instance`, Code.Unavailable);
            }
            if (!ctx.signal.aborted) await changed;
          } finally {
            off();
            ctx.signal.removeEventListener("abort", abort);
          }
          if (ctx.signal.aborted) throw abortedCallError(ctx);
        }
      },
    });
  };
}
