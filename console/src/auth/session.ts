// The signed-in session: the tokens in sessionStorage (this tab only, gone when it closes;
// docs/console.md says why), their renewal before expiry, and signing out.

import { type ConsoleConfig, type IssuerEndpoints, refresh } from "./oidc.js";
import { isExpired, renewalDelay, type TokenSet } from "./renewal.js";

const KEY = "trove.console.tokens";

export type SessionState = { kind: "signed-out"; reason?: string } | { kind: "signed-in"; tokens: TokenSet };

export class Session {
  private state: SessionState = { kind: "signed-out" };
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly listeners = new Set<(state: SessionState) => void>();

  constructor(
    private readonly config: ConsoleConfig,
    private readonly endpoints: () => Promise<IssuerEndpoints>,
  ) {
    const saved = JSON.parse(sessionStorage.getItem(KEY) ?? "null") as TokenSet | null;
    if (saved && !isExpired(saved, Date.now())) this.signIn(saved);
    else if (saved?.refreshToken) void this.renew(saved);
    else sessionStorage.removeItem(KEY);
  }

  get current(): SessionState {
    return this.state;
  }

  /** The access token to send, or undefined when signed out. */
  get token(): string | undefined {
    return this.state.kind === "signed-in" ? this.state.tokens.accessToken : undefined;
  }

  subscribe(listener: (state: SessionState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  signIn(tokens: TokenSet): void {
    sessionStorage.setItem(KEY, JSON.stringify(tokens));
    this.set({ kind: "signed-in", tokens });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.renew(tokens), renewalDelay(tokens, Date.now()));
  }

  /** Forgets the tokens (and the refresh token with them). */
  signOut(reason?: string): void {
    clearTimeout(this.timer);
    sessionStorage.removeItem(KEY);
    this.set({ kind: "signed-out", reason });
  }

  private async renew(tokens: TokenSet): Promise<void> {
    if (!tokens.refreshToken) {
      // A pasted token cannot be renewed: say so when it expires.
      const left = tokens.expiresAt - Date.now();
      this.timer = setTimeout(() => this.signOut("your token expired: sign in again or paste a new one"), left);
      return;
    }
    try {
      this.signIn(await refresh(this.config, await this.endpoints(), tokens.refreshToken));
    } catch (err) {
      if (isExpired(tokens, Date.now())) this.signOut(`the session could not be renewed: ${(err as Error).message}`);
      else this.timer = setTimeout(() => void this.renew(tokens), 10_000);
    }
  }

  private set(state: SessionState): void {
    this.state = state;
    for (const listener of this.listeners) listener(state);
  }
}
