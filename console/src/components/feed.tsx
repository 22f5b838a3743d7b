// The live badge and the feed panel: the stream's state, and the store's events as they arrive.

import type { LiveState } from "../live.js";

export interface FeedEntry {
  id: string;
  text: string;
  time: string;
}

export function LiveBadge(props: { state: LiveState; reason?: string }) {
  const label =
    props.state === "connected"
      ? "Live: connected"
      : props.state === "connecting"
        ? "Live: connecting…"
        : "Live: disconnected";
  return (
    <span class={`live ${props.state}`} role="status" title={props.reason}>
      <span class="dot" aria-hidden="true" />
      {label}
    </span>
  );
}

export function FeedPanel(props: { entries: FeedEntry[] }) {
  return (
    <aside class="feed" aria-labelledby="feed-title">
      <h2 id="feed-title">Changes</h2>
      {props.entries.length === 0 && <p class="hint">Changes to this store show here as they happen.</p>}
      <div role="log" aria-label="Change events, newest first">
        <ol>
          {props.entries.map((e) => (
            <li key={e.id}>
              <time>{e.time}</time> {e.text}
            </li>
          ))}
        </ol>
      </div>
    </aside>
  );
}
