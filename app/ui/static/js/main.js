// The shell: sign-in gate, hash routes, the session list beside (wide) or before (phone) the
// current view, toasts, the reconnecting banner, and the service worker.
//
// Routes: #/ (sessions), #/new, #/s/<id> (chat), #/s/<id>/<feature> (review, terminal, rewind,
// usage, actions), #/settings, #/usage. Feature views are other modules, imported when opened
// (chat.js `FeatureMount`), each given ctx = {api, sessionId, navigate, toast, events}.
// One session follower (stream.js) lives while a route names its session, so the chat and its
// feature views share one event stream.

import { html, render, useState, useEffect, useMemo, useCallback, useRef } from '../vendor/htm/standalone.module.js';
import api, { getToken, clearToken, checkToken, onUnauthorized, onReconnecting } from './api.js';
import { SessionFollower } from './stream.js';
import { watch } from './notify.js';
import { SignIn } from './views/signin.js';
import { SessionList, titleOf } from './views/sessions.js';
import { NewChat } from './views/newchat.js';
import { Chat, FeatureMount } from './views/chat.js';

const SESSION_FEATURES = new Set(['review', 'terminal', 'rewind', 'usage', 'actions', 'settings']);
const TOAST_MS = 4000;

export function parseRoute(hash) {
  const parts = String(hash || '').replace(/^#\/?/, '').split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  if (!parts.length) return { name: 'home' };
  if (parts[0] === 'new') return { name: 'new' };
  if (parts[0] === 's' && parts[1]) {
    const sub = parts[2];
    return { name: sub && SESSION_FEATURES.has(sub) ? sub : 'chat', id: parts[1] };
  }
  if (parts[0] === 'settings' || parts[0] === 'usage') return { name: parts[0] };
  return { name: 'home' };
}

const navigate = (hash) => {
  if (location.hash !== hash) location.hash = hash;
};

function useRoute() {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    window.addEventListener('hashchange', on);
    on(); // a hash changed between the first render and this effect fired no event we heard
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

// Only the latest toast is shown: one `toast` element at a time.
function useToast() {
  const [toast, setToast] = useState(null);
  const timer = useRef(0);
  const show = useCallback((text) => {
    clearTimeout(timer.current);
    setToast({ text: String(text), at: Date.now() });
    timer.current = setTimeout(() => setToast(null), TOAST_MS);
  }, []);
  return [toast, show];
}

function Shell({ onSignOut }) {
  const route = useRoute();
  const [toast, showToast] = useToast();
  const [retrying, setRetrying] = useState(0);
  const [sessions, setSessions] = useState(null);
  const [projects, setProjects] = useState([]);
  const [listError, setListError] = useState('');
  const [follower, setFollower] = useState(null);

  useEffect(() => onReconnecting(setRetrying), []);

  const loadSessions = useCallback(async () => {
    try {
      const [list, projs] = await Promise.all([api.get('/sessions'), api.get('/projects').catch(() => [])]);
      setSessions(Array.isArray(list) ? list : []);
      setProjects(Array.isArray(projs) ? projs : []);
      setListError('');
    } catch (e) {
      setListError(e.message || String(e));
    }
  }, []);
  useEffect(() => {
    loadSessions();
  }, [loadSessions]);
  useEffect(() => {
    if (route.name === 'home') loadSessions(); // coming back to the list: fresh titles
  }, [route.name]);

  const upsert = useCallback((s) => {
    if (!s || !s.id) return;
    setSessions((list) => {
      const items = list || [];
      const i = items.findIndex((x) => x.id === s.id);
      if (i < 0) return s.parent_id ? items : [s, ...items];
      const next = items.slice();
      next[i] = { ...items[i], ...s };
      return next;
    });
  }, []);
  const removed = useCallback((id) => {
    setSessions((list) => (list || []).filter((x) => x.id !== id));
    if (parseRoute(location.hash).id === id) navigate('#/');
  }, []);

  // The follower of the session the route names, kept across its chat and feature views.
  useEffect(() => {
    if (!route.id) {
      setFollower(null);
      return undefined;
    }
    const known = (sessions || []).find((s) => s.id === route.id);
    const f = new SessionFollower(route.id, known);
    const offs = [
      watch(f, () => titleOf(f.session)),
      f.on('session_updated', (env) => upsert(env && env.payload)),
      f.on('turn_started', () => upsert({ id: f.id, phase: 'turn' })),
      f.on('turn_complete', () => upsert({ id: f.id, phase: 'idle', updated_at: new Date().toISOString() })),
      f.on('session_deleted', () => {
        showToast('This chat was deleted');
        removed(f.id);
      }),
    ];
    f.open();
    setFollower(f);
    return () => {
      offs.forEach((off) => off());
      f.close();
    };
  }, [route.id]);

  const ctx = useMemo(() => ({
    api,
    sessionId: route.id || null,
    navigate,
    toast: showToast,
    events: route.id && follower && follower.id === route.id ? follower.events : null,
  }), [route.id, follower]);

  let main;
  const ready = follower && follower.id === route.id;
  if (route.name === 'new') {
    main = html`<${NewChat} navigate=${navigate} onCreated=${upsert} toast=${showToast} />`;
  } else if (route.name === 'chat') {
    main = ready ? html`<${Chat} follower=${follower} ctx=${ctx} toast=${showToast} />` : html`<p class="muted pad">Loading…</p>`;
  } else if (route.name === 'settings' || route.name === 'usage' || route.id) {
    main = !route.id || ready
      ? html`<${FeatureMount} key=${route.name} name=${route.name} ctx=${ctx} cls="page" />`
      : html`<p class="muted pad">Loading…</p>`;
  } else {
    main = html`<div class="placeholder"><p class="muted">Pick a chat, or start a new one.</p></div>`;
  }

  return html`<div class="shell" data-route=${route.name}>
    <aside class="side">
      <${SessionList} sessions=${sessions} projects=${projects} activeId=${route.id} loading=${sessions == null}
        error=${listError} onChanged=${upsert} onDeleted=${(id) => { removed(id); showToast('Chat deleted'); }}
        onSignOut=${onSignOut} toast=${showToast} />
    </aside>
    <main class="main">${main}</main>
    ${retrying > 0 && html`<div class="reconnecting" data-testid="reconnecting" role="status">Reconnecting…</div>`}
    ${toast && html`<div class="toast" data-testid="toast" role="status" key=${toast.at}>${toast.text}</div>`}
  </div>`;
}

function App() {
  // 'checking' until we know whether this kernel wants a token and whether ours is good.
  const [auth, setAuth] = useState('checking');
  const [notice, setNotice] = useState('');

  useEffect(() => {
    onUnauthorized(() => {
      setNotice('The kernel refused the token; sign in again.');
      setAuth('signin');
    });
    // Without a token, sign-in shows at once: probing the kernel without one would only earn
    // a 401 (logged by the browser as an error) on every kernel that needs a token.
    if (!getToken()) {
      setAuth('signin');
      return;
    }
    (async () => {
      try {
        const status = await checkToken(getToken());
        if (status === 401) {
          clearToken();
          setNotice('The kernel refused the saved token; sign in again.');
        }
        setAuth(status === 401 ? 'signin' : 'ok');
      } catch {
        setAuth('ok'); // unreachable for now: the shell shows what it can and retries
      }
    })();
  }, []);

  const signOut = useCallback(() => {
    clearToken();
    setNotice('');
    setAuth('signin');
  }, []);

  if (auth === 'checking') return html`<p class="muted pad center">Connecting…</p>`;
  if (auth === 'signin') {
    return html`<${SignIn} notice=${notice} onSignedIn=${() => { setNotice(''); setAuth('ok'); }} />`;
  }
  return html`<${Shell} onSignOut=${signOut} />`;
}

if (!location.hash) history.replaceState(null, '', '#/');
render(html`<${App} />`, document.getElementById('app'));

// The shell works offline once cached (sw.js, from the server helper); the API never is.
if ('serviceWorker' in navigator && window.isSecureContext) {
  window.addEventListener('load', () => {
    navigator.serviceWorker.register('/ui/sw.js', { scope: '/ui/' }).catch((e) => console.debug('service worker not registered', e));
  });
}
