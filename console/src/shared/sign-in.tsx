import { useState, type FormEvent, type ReactNode } from 'react';
import { forgetToken, readToken, saveToken } from './session';

/** Asks for the API token once; the children see the console only with a token. */
export function SignInGate({ children }: { children: ReactNode }) {
  const [token, setToken] = useState(readToken());
  const [draft, setDraft] = useState('');
  if (token) return <>{children}</>;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (draft.trim() === '') return;
    saveToken(draft);
    setToken(readToken());
  };
  return (
    <main className="sign-in">
      <h1>Sign in to promptwire</h1>
      <p>
        Paste an API token. The first start prints an administrator token; create more with the <code>createApiToken</code> mutation. The token stays in this
        browser only.
      </p>
      <form onSubmit={submit}>
        <label>
          API token
          <input data-field="token" type="password" autoComplete="off" autoFocus value={draft} onChange={(event) => setDraft(event.target.value)} />
        </label>
        <button type="submit" data-action="sign-in">
          Sign in
        </button>
      </form>
    </main>
  );
}

export function signOut(): void {
  forgetToken();
  window.location.reload();
}
