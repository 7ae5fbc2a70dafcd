// The session list: search, pin, rename, delete, grouped by project (pinned first).
//
// Routes: GET /sessions (top-level, newest first) and GET /projects, loaded by the shell;
// PATCH /sessions/{id} {pinned} / {title}; DELETE /sessions/{id} (after an inline confirm:
// deleting wipes the session's data and workspace).

import { html, useState, useMemo, useRef, useEffect } from '../../vendor/htm/standalone.module.js';
import api from '../api.js';
import { icon } from '../icons.js';

const enc = encodeURIComponent;

export function titleOf(s) {
  return (s && s.title && s.title.trim()) || 'New chat';
}

function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const today = new Date();
  return d.toDateString() === today.toDateString()
    ? d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })
    : d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
}

// Pinned chats first (most recently pinned on top), then chats without a project, then each
// project by name; inside a group the kernel's order (newest first) is kept.
function groups(sessions, projects) {
  const names = new Map((projects || []).map((p) => [p.id, p.name || p.path || 'Project']));
  const pinned = sessions.filter((s) => s.pinned).sort((a, b) => String(b.pinned_at || '').localeCompare(String(a.pinned_at || '')));
  const out = [];
  if (pinned.length) out.push({ key: 'pinned', label: 'Pinned', items: pinned });
  const loose = sessions.filter((s) => !s.pinned && !s.project_id);
  if (loose.length) out.push({ key: 'chats', label: 'Chats', items: loose });
  const byProject = new Map();
  for (const s of sessions) {
    if (s.pinned || !s.project_id) continue;
    if (!byProject.has(s.project_id)) byProject.set(s.project_id, []);
    byProject.get(s.project_id).push(s);
  }
  const ordered = [...byProject.entries()].sort((a, b) => String(names.get(a[0]) || '').localeCompare(String(names.get(b[0]) || '')));
  for (const [id, items] of ordered) out.push({ key: `p:${id}`, label: names.get(id) || 'Project', items });
  return out;
}

function Item({ s, active, onChanged, onDeleted, toast }) {
  const [mode, setMode] = useState(''); // '' | 'rename' | 'confirm'
  const [name, setName] = useState(titleOf(s));
  const [busy, setBusy] = useState(false);
  const input = useRef(null);
  useEffect(() => {
    if (mode === 'rename' && input.current) input.current.select();
  }, [mode]);

  async function act(fn) {
    setBusy(true);
    try {
      await fn();
    } catch (e) {
      toast(e.message || String(e));
    } finally {
      setBusy(false);
    }
  }
  const pin = () => act(async () => onChanged(await api.patch(`/sessions/${enc(s.id)}`, { pinned: !s.pinned })));
  const rename = (e) => {
    e.preventDefault();
    const title = name.trim();
    if (!title || title === titleOf(s)) return setMode('');
    act(async () => {
      onChanged(await api.patch(`/sessions/${enc(s.id)}`, { title }));
      setMode('');
    });
  };
  const remove = () => act(async () => {
    await api.del(`/sessions/${enc(s.id)}`);
    onDeleted(s.id);
  });

  return html`
    <li class=${`session ${active ? 'is-active' : ''}`} data-testid="session-item" data-session-id=${s.id}>
      ${mode === 'rename'
        ? html`<form class="session-rename" onSubmit=${rename}>
            <input ref=${input} class="input" value=${name} aria-label="Chat title" data-testid="session-rename-input"
              onInput=${(e) => setName(e.currentTarget.value)}
              onKeyDown=${(e) => e.key === 'Escape' && setMode('')} />
            <button class="btn btn-primary" type="submit" disabled=${busy} data-testid="session-rename-save">Save</button>
          </form>`
        : html`<a class="session-link" href=${`#/s/${enc(s.id)}`} aria-current=${active ? 'page' : undefined}>
            <span class="session-title">${s.pinned ? icon('pin') : ''}${titleOf(s)}</span>
            <span class="session-meta">${s.phase === 'turn' ? 'working… · ' : ''}${when(s.updated_at || s.created_at)} · ${s.model || ''}</span>
          </a>`}
      ${mode === 'confirm'
        ? html`<div class="session-confirm" role="group" aria-label="Delete this chat?">
            <button class="btn btn-danger" type="button" disabled=${busy} data-testid="session-delete-confirm" onClick=${remove}>Delete</button>
            <button class="btn" type="button" onClick=${() => setMode('')}>Keep</button>
          </div>`
        : mode === '' && html`<div class="session-actions">
            <button class="icon-btn" type="button" data-testid="session-pin" aria-pressed=${s.pinned ? 'true' : 'false'}
              aria-label=${s.pinned ? 'Unpin' : 'Pin'} title=${s.pinned ? 'Unpin' : 'Pin'} disabled=${busy} onClick=${pin}>${s.pinned ? '★' : '☆'}</button>
            <button class="icon-btn" type="button" data-testid="session-rename" aria-label="Rename" title="Rename"
              onClick=${() => { setName(titleOf(s)); setMode('rename'); }}>✎</button>
            <button class="icon-btn" type="button" data-testid="session-delete" aria-label="Delete" title="Delete"
              onClick=${() => setMode('confirm')}>${icon('trash')}</button>
          </div>`}
    </li>`;
}

/** The sidebar (wide screens) or home view (phones). */
export function SessionList({ sessions, projects, activeId, loading, error, onChanged, onDeleted, onSignOut, toast }) {
  const [query, setQuery] = useState('');
  const shown = useMemo(() => {
    const q = query.trim().toLowerCase();
    const list = sessions || [];
    return q ? list.filter((s) => titleOf(s).toLowerCase().includes(q) || String(s.model || '').toLowerCase().includes(q)) : list;
  }, [sessions, query]);
  const grouped = useMemo(() => groups(shown, projects), [shown, projects]);

  return html`
    <nav class="sessions" aria-label="Chats">
      <header class="bar">
        <span class="brand">Foya</span>
        <span class="grow"></span>
        <a class="icon-btn" href="#/usage" aria-label="Usage" title="Usage">${icon('chart')}</a>
        <a class="icon-btn" href="#/settings" aria-label="Settings" title="Settings">${icon('settings')}</a>
        <button class="icon-btn" type="button" data-testid="signout" aria-label="Sign out" title="Sign out" onClick=${onSignOut}>${icon('exit')}</button>
      </header>
      <div class="sessions-tools">
        <a class="btn btn-primary btn-wide" href="#/new" data-testid="new-chat">New chat</a>
        <input class="input" type="search" placeholder="Search chats" aria-label="Search chats"
          data-testid="session-search" value=${query} onInput=${(e) => setQuery(e.currentTarget.value)} />
      </div>
      <div class="sessions-scroll" data-testid="session-list">
        ${error && html`<p class="error" role="alert">${error}</p>`}
        ${loading && !(sessions || []).length && html`<p class="muted pad">Loading…</p>`}
        ${!loading && !shown.length && html`<p class="muted pad">${query ? 'No chat matches.' : 'No chats yet.'}</p>`}
        ${grouped.map((g) => html`
          <section class="session-group" key=${g.key}>
            <h2 class="group-label">${g.label}</h2>
            <ul class="session-items">
              ${g.items.map((s) => html`<${Item} key=${s.id} s=${s} active=${s.id === activeId}
                onChanged=${onChanged} onDeleted=${onDeleted} toast=${toast} />`)}
            </ul>
          </section>`)}
      </div>
    </nav>`;
}
