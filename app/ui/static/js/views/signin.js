// Sign-in: the user pastes the kernel's bearer token once; it is checked against GET /readyz
// (200 with a good token, 401 otherwise) before it is kept. The token is a password: the field
// hides it and the browser may offer to store it.

import { html, useState, useRef, useEffect } from '../../vendor/htm/standalone.module.js';
import { checkToken, setToken } from '../api.js';

const MIN_LENGTH = 32; // the kernel refuses shorter tokens without looking at them

export function SignIn({ onSignedIn, notice }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState(notice || '');
  const [busy, setBusy] = useState(false);
  const input = useRef(null);
  useEffect(() => input.current && input.current.focus(), []);

  async function submit(e) {
    e.preventDefault();
    const token = value.trim();
    if (token.length < MIN_LENGTH) {
      setError(`A token has at least ${MIN_LENGTH} characters.`);
      return;
    }
    setBusy(true);
    setError('');
    try {
      const status = await checkToken(token);
      if (status === 200) {
        setToken(token);
        onSignedIn();
        return;
      }
      setError(status === 401 ? 'The kernel refused this token.' : `The kernel answered ${status}.`);
    } catch {
      setError('The kernel cannot be reached.');
    } finally {
      setBusy(false);
    }
  }

  return html`
    <main class="signin">
      <form class="signin-card" onSubmit=${submit} novalidate>
        <h1 class="signin-title">Foya</h1>
        <p class="muted">Paste the kernel's access token. It stays in this browser only.</p>
        <label class="field">
          <span class="field-label">Access token</span>
          <input ref=${input} class="input" type="password" autocomplete="current-password"
            autocapitalize="off" spellcheck="false" data-testid="token-input" value=${value}
            onInput=${(e) => setValue(e.currentTarget.value)} aria-invalid=${error ? 'true' : 'false'} />
        </label>
        ${error && html`<p class="error" role="alert" data-testid="signin-error">${error}</p>`}
        <button class="btn btn-primary btn-wide" type="submit" data-testid="signin-submit" disabled=${busy}>
          ${busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>`;
}
