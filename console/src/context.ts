// What every screen gets from the shell: the API clients, the session, the configuration and navigation.

import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Clients } from "./api.js";
import type { ConsoleConfig } from "./auth/oidc.js";
import type { Session } from "./auth/session.js";

export interface ConsoleContext {
  clients: Clients;
  session: Session;
  config: ConsoleConfig;
  /** Goes to a console URL without reloading the page. */
  navigate(href: string): void;
}

export const AppContext = createContext<ConsoleContext | undefined>(undefined);

export function useApp(): ConsoleContext {
  const app = useContext(AppContext);
  if (!app) throw new Error("useApp outside the console shell");
  return app;
}
