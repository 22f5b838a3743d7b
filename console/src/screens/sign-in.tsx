// Signing in: the authorization code flow with PKCE against the configured issuer, or a pasted token.

import { useState } from "preact/hooks";
import type { ConsoleConfig } from "../auth/oidc.js";
import { pastedTokenSet, type TokenSet } from "../auth/renewal.js";
import { ErrorLine } from "../components/error-line.js";

export interface SignInProps {
  config: ConsoleConfig;
  error?: string;
  onSignIn(): Promise<void>;
  onToken(tokens: TokenSet): void;
}

export function SignIn({ config, error, onSignIn, onToken }: SignInProps) {
  const [problem, setProblem] = useState<string | undefined>(error);
  const [busy, setBusy] = useState(false);
  const [pasted, setPasted] = useState("");
  const issuer = config.devIssuer ? "this server's development issuer" : config.issuer;

  const signIn = async () => {
    setBusy(true);
    try {
      await onSignIn();
    } catch (err) {
      setProblem((err as Error).message);
      setBusy(false);
    }
  };
  const usePasted = (event: Event) => {
    event.preventDefault();
    try {
      onToken(pastedTokenSet(pasted, Date.now()));
    } catch (err) {
      setProblem((err as Error).message);
    }
  };

  return (
    <main class="sign-in" id="main">
      <h1>Trove console</h1>
      <p>Browse and change stores, and watch their changes live.</p>
      <ErrorLine text={problem} />
      <button type="button" onClick={signIn} disabled={busy}>
        {busy ? "Signing in…" : "Sign in"}
      </button>
      <p class="hint">
        Signs in with {issuer} (client <code>{config.clientId}</code>).
      </p>
      <details>
        <summary>Paste a token instead</summary>
        <form onSubmit={usePasted}>
          <label for="pasted-token">Bearer token</label>
          <textarea
            id="pasted-token"
            rows={4}
            value={pasted}
            onInput={(e) => setPasted((e.target as HTMLTextAreaElement).value)}
            spellcheck={false}
            autocomplete="off"
          />
          <button type="submit" class="secondary">
            Use this token
          </button>
        </form>
      </details>
    </main>
  );
}
