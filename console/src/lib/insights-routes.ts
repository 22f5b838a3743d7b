// The insights application's URLs: each place has its own, so a link opens it, the back button
// returns, and a deep link works in a new tab.
//   /console/insights                              the projects
//   /console/insights/{project}                    a project: its environments, promotion
//   /console/insights/{project}/{environment}      an environment: its reports, a new one
//   /console/insights/{project}/{environment}/{report}[/{tab}]   a report, on a tab
// Query: `?path=` (the resource a Dependencies or Graph tab is about), `?show=problems` (the graph).

import { CONSOLE_ROOT } from "./paths.js";

export const REPORT_TABS = ["problems", "resources", "related", "graph"] as const;
export type ReportTab = (typeof REPORT_TABS)[number];

export interface InsightsPlace {
  project?: string;
  environment?: string;
  report?: string;
  tab?: ReportTab;
}

const ROOT = `${CONSOLE_ROOT}insights`;

/** The URL of a place; the report's first tab (problems) is its plain URL. */
export function insightsHref(place: InsightsPlace, query: Record<string, string> = {}): string {
  const parts = [place.project, place.environment, place.report].filter((p): p is string => !!p);
  if (place.report && place.tab && place.tab !== "problems") parts.push(place.tab);
  const path = parts.length === 0 ? ROOT : `${ROOT}/${parts.map(encodeURIComponent).join("/")}`;
  const search = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== "")).toString();
  return search ? `${path}?${search}` : path;
}

/** The place an /console/insights URL names; undefined for another URL, a bad escape or an unknown tab. */
export function parseInsightsHref(pathname: string): InsightsPlace | undefined {
  if (pathname !== ROOT && !pathname.startsWith(`${ROOT}/`)) return undefined;
  const segments = pathname
    .slice(ROOT.length)
    .split("/")
    .filter((s) => s !== "");
  if (segments.length > 4) return undefined;
  try {
    const [project, environment, report, tab] = segments.map(decodeURIComponent);
    if (tab !== undefined && !(REPORT_TABS as readonly string[]).includes(tab)) return undefined;
    return {
      ...(project ? { project } : {}),
      ...(environment ? { environment } : {}),
      ...(report ? { report, tab: (tab ?? "problems") as ReportTab } : {}),
    };
  } catch {
    return undefined;
  }
}
