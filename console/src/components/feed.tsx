// The live badge and the feed panel: the stream's state, and the store's events as they arrive.

import { formatShortTime, formatTime } from "../lib/format.js";
import type { LiveState } from "../live.js";

export interface FeedEntry {
  id: string;
  text: string;
  /** When the change was made, from the server; absent or 0 when not recorded. */
  millis?: number;
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
    // Focusable: it scrolls when the events outgrow it, and a keyboard user scrolls it with the arrows.
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard (axe scrollable-region-focusable)
    <aside class="feed" aria-labelledby="feed-title" tabIndex={0}>
      <h2 id="feed-title">Changes</h2>
      {props.entries.length === 0 && <p class="hint">Changes to this store show here as they happen.</p>}
      <div role="log" aria-label="Change events, newest first">
        <ol>
          {props.entries.map((e) => (
            <li key={e.id}>
              <EventTime millis={e.millis} /> {e.text}
            </li>
          ))}
        </ol>
      </div>
    </aside>
  );
}

/** The event's time as the server recorded it: HH:MM:SS today, else the date too; the whole instant in the tooltip. */
function EventTime(props: { millis?: number }) {
  if (!props.millis)
    return (
      <span class="time" title="A folder's event: its time is not recorded (the change below it has it)">
        {"—"}
      </span>
    );
  const full = formatTime(props.millis);
  const today = formatShortTime(props.millis).length === 5;
  return (
    <time class="time" dateTime={new Date(props.millis).toISOString()} title={full}>
      {today ? full.slice(11) : full}
    </time>
  );
}
