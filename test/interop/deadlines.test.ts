// Deadlines and cancellation on the long-waiting RPCs (Poll, WatchChanges, WatchReport): a
// deadline that runs out ends the call with DEADLINE_EXCEEDED on gRPC, Connect and gRPC-Web,
// never with OK; a cancelled call ends with CANCELLED and the server stops waiting.
//
// The clients send the deadline header themselves (grpc-timeout, connect-timeout-ms) without
// a client-side timer, so what they observe is what the server answered; one case per protocol
// also uses the client's own timeoutMs, as applications do.

import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import {
  type Client,
  Code,
  ConnectError,
  createClient,
  createHandlerContext,
  type Transport,
} from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ProjectService } from "@trove/sdk/gen/trove/insights/v1/projects_pb.js";
import { ReportService } from "@trove/sdk/gen/trove/insights/v1/reports_pb.js";
import {
  ChangeService,
  PollRequestSchema,
  WatchChangesRequestSchema,
} from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anonymousCaller, callerKey } from "../../src/auth/caller.js";
import { ChangeNotifier } from "../../src/services/change-notifier.js";
import { ChangeCore } from "../../src/services/change-service.js";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer;
let report: { reportId: string; projectId: string; environmentId: string };

beforeAll(async () => {
  // No report worker: a report stays "generating", so WatchReport waits.
  t = await startServer({ reportWorker: false });
  const grpcTransport = createGrpcTransport({ baseUrl: t.url });
  const projects = createClient(ProjectService, grpcTransport);
  const { project } = await projects.createProject({ name: "deadlines", account: "acme" });
  const projectId = project?.id ?? "";
  const { environment } = await projects.createEnvironment({ projectId, name: "draft" });
  const environmentId = environment?.id ?? "";
  const created = await createClient(ReportService, grpcTransport).createReport({ projectId, environmentId });
  report = { reportId: created.reportId[0] ?? "", projectId, environmentId };
});
afterAll(() => t?.stop());

type Protocol = "gRPC" | "Connect" | "Connect h2" | "gRPC-Web";

const TRANSPORTS: Record<Protocol, () => Transport> = {
  gRPC: () => createGrpcTransport({ baseUrl: t.url }),
  Connect: () => createConnectTransport({ baseUrl: t.url, httpVersion: "1.1" }),
  "Connect h2": () => createConnectTransport({ baseUrl: t.url, httpVersion: "2" }),
  "gRPC-Web": () => createGrpcWebTransport({ baseUrl: t.url, httpVersion: "2" }),
};

/** The deadline header of each protocol, as the client would send it, for `ms` milliseconds. */
function deadlineHeader(protocol: Protocol, ms: number): Record<string, string> {
  return protocol.startsWith("Connect") ? { "connect-timeout-ms": String(ms) } : { "grpc-timeout": `${ms}m` };
}

async function outcome(call: () => Promise<unknown>): Promise<Code | "OK"> {
  try {
    await call();
    return "OK";
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

async function drain(stream: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of stream);
}

describe.each(Object.keys(TRANSPORTS) as Protocol[])("%s", (protocol) => {
  let changes: Client<typeof ChangeService>;
  let reports: Client<typeof ReportService>;
  beforeAll(() => {
    const transport = TRANSPORTS[protocol]();
    changes = createClient(ChangeService, transport);
    reports = createClient(ReportService, transport);
  });
  const home = async () => {
    const { events } = await changes.poll({});
    const reset = events.find((e) => e.kind.case === "reset" && e.kind.value.store === "home");
    return reset?.kind.case === "reset" ? reset.kind.value.eventId : 0n;
  };

  it("Poll whose deadline runs out before any event: DEADLINE_EXCEEDED", async () => {
    const cursors = [{ store: "home", eventId: await home() }];
    const headers = deadlineHeader(protocol, 200);
    expect(await outcome(() => changes.poll({ cursors, waitMillis: 30_000 }, { headers }))).toBe(Code.DeadlineExceeded);
    expect(await outcome(() => changes.poll({ cursors, waitMillis: 30_000 }, { timeoutMs: 200 }))).toBe(
      Code.DeadlineExceeded,
    );
  });

  it("Poll whose own wait runs out first: OK with no events", async () => {
    const cursors = [{ store: "home", eventId: await home() }];
    const out = await changes.poll({ cursors, waitMillis: 100 }, { headers: deadlineHeader(protocol, 20_000) });
    expect(out.events).toEqual([]);
  });

  it("WatchChanges whose deadline runs out: DEADLINE_EXCEEDED after the messages sent", async () => {
    const cursors = [{ store: "home", eventId: await home() }];
    const request = { cursors, heartbeatMillis: 100 };
    let heartbeats = 0;
    const code = await outcome(async () => {
      for await (const m of changes.watchChanges(request, { headers: deadlineHeader(protocol, 400) })) {
        if (m.heartbeat) heartbeats++;
      }
    });
    expect(code).toBe(Code.DeadlineExceeded);
    expect(heartbeats).toBeGreaterThan(0);
    expect(await outcome(() => drain(changes.watchChanges(request, { timeoutMs: 300 })))).toBe(Code.DeadlineExceeded);
  });

  it("WatchReport of a report still generating whose deadline runs out: DEADLINE_EXCEEDED", async () => {
    const key = report;
    expect(await outcome(() => drain(reports.watchReport({ key }, { headers: deadlineHeader(protocol, 300) })))).toBe(
      Code.DeadlineExceeded,
    );
    expect(await outcome(() => drain(reports.watchReport({ key }, { timeoutMs: 300 })))).toBe(Code.DeadlineExceeded);
  });

  it("a call the client cancels ends with CANCELLED", async () => {
    const cursors = [{ store: "home", eventId: await home() }];
    const abort = new AbortController();
    const code = outcome(async () => {
      for await (const m of changes.watchChanges({ cursors, heartbeatMillis: 100 }, { signal: abort.signal })) {
        if (m.heartbeat) abort.abort();
      }
    });
    expect(await code).toBe(Code.Canceled);
    const poll = new AbortController();
    const polled = outcome(() => changes.poll({ cursors, waitMillis: 30_000 }, { signal: poll.signal }));
    poll.abort();
    expect(await polled).toBe(Code.Canceled);
  });
});

describe("@grpc/grpc-js", () => {
  type Callback<T> = (err: grpc.ServiceError | null, value?: T) => void;
  interface ChangeClient extends grpc.Client {
    Poll(
      req: { cursors: { store: string; eventId: string }[]; waitMillis: number },
      options: grpc.CallOptions,
      cb: Callback<{ events: unknown[] }>,
    ): grpc.ClientUnaryCall;
    WatchChanges(
      req: { cursors: { store: string; eventId: string }[]; heartbeatMillis: number },
      options: grpc.CallOptions,
    ): grpc.ClientReadableStream<{ heartbeat: boolean }>;
  }
  let client: ChangeClient;
  beforeAll(() => {
    const definition = protoLoader.loadSync(["trove/resources/v2/changes.proto"], {
      includeDirs: [fileURLToPath(new URL("../../proto", import.meta.url))],
      longs: String,
      defaults: true,
      oneofs: true,
    });
    const v2 = (
      grpc.loadPackageDefinition(definition) as unknown as {
        trove: { resources: { v2: Record<"ChangeService", grpc.ServiceClientConstructor> } };
      }
    ).trove.resources.v2;
    client = new v2.ChangeService(new URL(t.url).host, grpc.credentials.createInsecure()) as unknown as ChangeClient;
  });
  afterAll(() => client?.close());

  it("Poll and WatchChanges with a deadline end with DEADLINE_EXCEEDED; a cancelled watch with CANCELLED", async () => {
    const cursors = [{ store: "home", eventId: String((await t.storage.getStore("home"))?.lastEventId ?? 0) }];
    const polled = await new Promise<grpc.ServiceError | null>((resolve) => {
      client.Poll({ cursors, waitMillis: 30_000 }, { deadline: Date.now() + 300 }, (err) => resolve(err));
    });
    expect(polled?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    const watched = await new Promise<grpc.StatusObject>((resolve) => {
      const call = client.WatchChanges({ cursors, heartbeatMillis: 100 }, { deadline: Date.now() + 300 });
      call.on("data", () => {});
      call.on("error", () => {});
      call.on("status", resolve);
    });
    expect(watched.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    const cancelled = await new Promise<grpc.StatusObject>((resolve) => {
      const call = client.WatchChanges({ cursors, heartbeatMillis: 100 }, {});
      call.on("data", () => call.cancel());
      call.on("error", () => {});
      call.on("status", resolve);
    });
    expect(cancelled.code).toBe(grpc.status.CANCELLED);
  });
});

describe("the core stops waiting when its call is cancelled", () => {
  let notifier: ChangeNotifier;
  beforeAll(() => {
    notifier = new ChangeNotifier(t.storage);
  });
  afterAll(() => notifier?.close());
  const core = () => new ChangeCore({ storage: t.storage, notifier, pollWait: 60_000 });
  const context = (signal: AbortSignal, method: "poll" | "watchChanges") => {
    const ctx = createHandlerContext({
      service: ChangeService,
      method: ChangeService.method[method],
      protocolName: "test",
      requestMethod: "POST",
      url: "/",
      requestSignal: signal,
    });
    ctx.values.set(callerKey, anonymousCaller);
    return ctx;
  };

  it("Poll and WatchChanges end with CANCELLED once the client goes away", async () => {
    const store = (await t.storage.getStore("home"))?.lastEventId ?? 0;
    const cursors = [{ store: "home", eventId: BigInt(store) }];
    const abort = new AbortController();
    const poll = core().poll(create(PollRequestSchema, { cursors }), context(abort.signal, "poll"));
    abort.abort();
    expect(await outcome(() => poll)).toBe(Code.Canceled);
    expect(notifier.waiterCount).toBe(0);

    const watch = new AbortController();
    const stream = core().watchChanges(
      create(WatchChangesRequestSchema, { cursors, heartbeatMillis: 100 }),
      context(watch.signal, "watchChanges"),
    );
    const code = outcome(async () => {
      for await (const _ of stream) watch.abort();
    });
    expect(await code).toBe(Code.Canceled);
    expect(notifier.waiterCount).toBe(0);
  });
});
