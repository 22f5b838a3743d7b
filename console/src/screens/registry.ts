// The console's screens: each one a module loaded when first shown (its own chunk), matched by URL.
// A new screen is one entry here; a heavy one (the dependency graph) stays out of the first load.

import type { ComponentType } from "preact";
import { parseInsightsHref } from "../lib/insights-routes.js";
import { CONSOLE_ROOT, parseBrowseHref } from "../lib/paths.js";

export interface ScreenProps {
  params: Record<string, string>;
  /** The URL's query ("?as-of=12"), for the state a screen keeps there. */
  search: string;
}

export interface ScreenDefinition {
  id: string;
  /** The screen's parameters when it shows this URL path. */
  match(pathname: string): Record<string, string> | undefined;
  load(): Promise<ComponentType<ScreenProps>>;
  /** The document title while it shows. */
  title(params: Record<string, string>): string;
  /** Its link in the navigation, when it has one. */
  nav?: { label: string; href: string };
}

export const SCREENS: ScreenDefinition[] = [
  {
    id: "stores",
    match: (p) => (p === CONSOLE_ROOT || p === `${CONSOLE_ROOT}stores` ? {} : undefined),
    load: () => import("./stores.js").then((m) => m.StoresScreen),
    title: () => "Stores",
    nav: { label: "Stores", href: CONSOLE_ROOT },
  },
  {
    id: "browse",
    match: (p) => parseBrowseHref(p),
    load: () => import("./browse.js").then((m) => m.BrowseScreen),
    title: (params) => `${params.store}/${params.path ?? ""}`,
  },
  {
    id: "insights",
    match: (p) => {
      const place = parseInsightsHref(p);
      return place && Object.fromEntries(Object.entries(place).filter((e): e is [string, string] => !!e[1]));
    },
    load: () => import("./insights.js").then((m) => m.InsightsScreen),
    title: (params) => (params.report ? `Report · Insights` : "Insights"),
    nav: { label: "Insights", href: `${CONSOLE_ROOT}insights` },
  },
];

export function screenFor(pathname: string): { screen: ScreenDefinition; params: Record<string, string> } | undefined {
  for (const screen of SCREENS) {
    const params = screen.match(pathname);
    if (params) return { screen, params };
  }
  return undefined;
}
