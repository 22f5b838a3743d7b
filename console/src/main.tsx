// Entry point: reads the configuration, finishes a sign-in redirect if this page is one, then shows the shell.

import { render } from "preact";
import { createClients } from "./api.js";
import { App } from "./app.js";
import { completeSignIn, discover, type IssuerEndpoints, loadConfig } from "./auth/oidc.js";
import { Session } from "./auth/session.js";
import "./styles.css";

async function start(root: HTMLElement): Promise<void> {
  const config = await loadConfig();
  let endpoints: Promise<IssuerEndpoints> | undefined;
  const issuerEndpoints = () => {
    endpoints ??= discover(config).catch((err: unknown) => {
      endpoints = undefined;
      throw err;
    });
    return endpoints;
  };
  const session = new Session(config, issuerEndpoints);
  let signInError: string | undefined;
  try {
    const done = new URLSearchParams(location.search).has("state")
      ? await completeSignIn(config, await issuerEndpoints())
      : undefined;
    if (done) session.signIn(done.tokens);
  } catch (err) {
    signInError = (err as Error).message;
  }
  // index.html's "Loading the Trove console…" placeholder goes: render() adds to the element's
  // children rather than replacing what the page had.
  root.replaceChildren();
  render(
    <App
      config={config}
      session={session}
      clients={createClients(session)}
      endpoints={issuerEndpoints}
      signInError={signInError}
    />,
    root,
  );
}

const root = document.getElementById("app") as HTMLElement;
start(root).catch((err: unknown) => {
  root.textContent = `The console could not start: ${(err as Error).message}`;
});
