// The live feed of one store: WatchChanges streamed over Connect from the store's last event id,
// reconnecting (from the last event seen) when the stream drops, with a state for the badge.

import { Code, ConnectError } from "@connectrpc/connect";
import type { ChangeEvent } from "../../sdk/src/gen/trove/resources/v2/changes_pb.js";
import type { Clients } from "./api.js";

export type LiveState = "connecting" | "connected" | "disconnected";

export type LiveEvent = { kind: "change"; change: ChangeEvent } | { kind: "reset"; eventId: bigint };

export interface LiveFeedOptions {
  clients: Clients;
  store: string;
  onEvent(event: LiveEvent): void;
  onState(state: LiveState, reason?: string): void;
}

/** Heartbeats of an idle stream: a dropped connection shows within about this time. */
const HEARTBEAT = 5_000;

/** Delay before reconnect attempt `n` (1, 2, 4 … 15 s). */
export function reconnectDelay(attempt: number): number {
  return Math.min(15_000, 1000 * 2 ** Math.max(0, attempt - 1));
}

/** Follows the store until `stop()`; returns the stop function. */
export function followStore(options: LiveFeedOptions): () => void {
  const { clients, store } = options;
  const abort = new AbortController();
  let cursor: bigint | undefined;
  let attempt = 0;
  let first = true;

  const run = async () => {
    while (!abort.signal.aborted) {
      options.onState("connecting");
      try {
        if (cursor === undefined) {
          const { store: info } = await clients.stores.getStore({ name: store }, { signal: abort.signal });
          cursor = info?.lastEventId ?? 0n;
        }
        // The server answers a watch with its first message, so the first connection starts one
        // event back: the store's latest change arrives at once and says the stream is open.
        // A store without events says so with the first heartbeat.
        const from = first && cursor > 0n ? cursor - 1n : cursor;
        first = false;
        const stream = clients.changes.watchChanges(
          { cursors: [{ store, eventId: from }], heartbeatMillis: HEARTBEAT },
          { signal: abort.signal },
        );
        let opened = false;
        for await (const message of stream) {
          if (!opened) {
            opened = true;
            attempt = 0;
            options.onState("connected");
          }
          for (const event of message.events) {
            if (event.kind.case === "change") {
              cursor = event.kind.value.eventId;
              options.onEvent({ kind: "change", change: event.kind.value });
            } else if (event.kind.case === "reset") {
              cursor = event.kind.value.eventId;
              options.onEvent({ kind: "reset", eventId: event.kind.value.eventId });
            }
          }
        }
        options.onState("disconnected", "the server ended the stream");
      } catch (err) {
        if (abort.signal.aborted) return;
        const e = ConnectError.from(err);
        if (e.code === Code.NotFound || e.code === Code.PermissionDenied || e.code === Code.Unauthenticated) {
          options.onState("disconnected", e.rawMessage);
          if (e.code !== Code.Unauthenticated) return;
        } else {
          options.onState("disconnected", e.rawMessage);
        }
      }
      attempt++;
      await new Promise((resolve) => setTimeout(resolve, reconnectDelay(attempt)));
    }
  };
  void run();
  return () => abort.abort();
}
