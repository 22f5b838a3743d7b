// The shell: signed out, the sign-in screen; signed in, the header (navigation, who, sign out) and
// the screen the URL names, loaded on demand.

import type { ComponentType } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import type { Clients } from "./api.js";
import { beginSignIn, type ConsoleConfig, type IssuerEndpoints } from "./auth/oidc.js";
import { type TokenSet, userNameOf } from "./auth/renewal.js";
import type { Session, SessionState } from "./auth/session.js";
import { AppContext, type ConsoleContext } from "./context.js";
import { SCREENS, type ScreenProps, screenFor } from "./screens/registry.js";
import { SignIn } from "./screens/sign-in.js";

export interface AppProps {
  config: ConsoleConfig;
  session: Session;
  clients: Clients;
  endpoints: () => Promise<IssuerEndpoints>;
  signInError?: string;
}

const loaded = new Map<string, ComponentType<ScreenProps>>();

export function App(props: AppProps) {
  const { session } = props;
  const [state, setState] = useState<SessionState>(session.current);
  // The path and the query: a screen's state in the query (browse's ?as-of=) is a place too.
  const [route, setRoute] = useState({ pathname: location.pathname, search: location.search });
  const pathname = route.pathname;
  useEffect(() => session.subscribe(setState), [session]);
  useEffect(() => {
    const pop = () => setRoute({ pathname: location.pathname, search: location.search });
    addEventListener("popstate", pop);
    return () => removeEventListener("popstate", pop);
  }, []);

  const context = useMemo<ConsoleContext>(
    () => ({
      clients: props.clients,
      session,
      config: props.config,
      navigate(href: string) {
        if (href === location.pathname + location.search) return;
        history.pushState(null, "", href);
        setRoute({ pathname: location.pathname, search: location.search });
      },
    }),
    [props.clients, session, props.config],
  );

  // Links inside the console navigate without reloading the page.
  const onClick = (event: MouseEvent) => {
    const link = (event.target as Element | null)?.closest?.("a");
    if (!link || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey)
      return;
    if (link.target || link.hasAttribute("download") || link.origin !== location.origin) return;
    if (!link.pathname.startsWith("/console/")) return;
    event.preventDefault();
    context.navigate(link.pathname + link.search);
    // A link in the content (a listing's folder, a store) goes away with the screen it opens: the
    // focus moves to the new content, where the next Tab goes on, rather than back to the page's
    // top. Links in a navigation (sections, breadcrumbs, folder tree) stay, and keep the focus.
    if (!link.closest("nav")) document.getElementById("main")?.focus();
  };

  if (state.kind === "signed-out") {
    return (
      <SignIn
        config={props.config}
        error={state.reason ?? props.signInError}
        onSignIn={async () => beginSignIn(props.config, await props.endpoints(), location.pathname + location.search)}
        onToken={(tokens) => session.signIn(tokens)}
      />
    );
  }

  return (
    <AppContext.Provider value={context}>
      {/* biome-ignore lint/a11y/noStaticElementInteractions: delegated link handling; the links themselves are the controls */}
      {/* biome-ignore lint/a11y/useKeyWithClickEvents: Enter on a link raises click, which this handles */}
      <div class="shell" onClick={onClick}>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <span class="brand">Trove</span>
          <nav aria-label="Sections">
            {SCREENS.filter((s) => s.nav).map((s) => (
              <a key={s.id} href={s.nav?.href} aria-current={screenFor(pathname)?.screen === s ? "page" : undefined}>
                {s.nav?.label}
              </a>
            ))}
          </nav>
          <SignedInAs tokens={state.tokens} />
          <button type="button" class="secondary" onClick={() => session.signOut("You signed out.")}>
            Sign out
          </button>
        </header>
        <main id="main" tabIndex={-1}>
          <ScreenOutlet pathname={pathname} search={route.search} />
        </main>
      </div>
    </AppContext.Provider>
  );
}

/** Who is signed in: the token's user name (docs/console.md, "The header"), and how the token came. */
function SignedInAs({ tokens }: { tokens: TokenSet }) {
  const name = userNameOf(tokens.accessToken);
  const how = tokens.source === "pasted" ? "with a pasted token" : "through the issuer";
  return (
    <span class="who" title={`Signed in ${how}`}>
      Signed in as <strong>{name ?? "an unnamed user"}</strong>
      {tokens.source === "pasted" && " (pasted token)"}
    </span>
  );
}

function ScreenOutlet({ pathname, search }: { pathname: string; search: string }) {
  const found = screenFor(pathname);
  const [, setVersion] = useState(0);
  const [error, setError] = useState<string>();
  const Screen = found ? loaded.get(found.screen.id) : undefined;
  useEffect(() => {
    if (found) document.title = `${found.screen.title(found.params)} · Trove`;
    if (!found || Screen) return;
    found.screen.load().then(
      (component) => {
        loaded.set(found.screen.id, component);
        setVersion((v) => v + 1);
      },
      (err: Error) => setError(`This screen could not be loaded: ${err.message}`),
    );
  }, [found?.screen, Screen, found]);
  if (!found) {
    return (
      <section>
        <h1>Not found</h1>
        <p>
          No screen at <code>{pathname}</code>. <a href="/console/">Go to the stores.</a>
        </p>
      </section>
    );
  }
  if (error) return <p role="alert">{error}</p>;
  if (!Screen) return <p class="loading">Loading…</p>;
  return <Screen params={found.params} search={search} />;
}
