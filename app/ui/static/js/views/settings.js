// Settings: model provider connections, the default models, projects (projects.js) and push
// notifications (push.js).
//
// Routes: GET /connections (never the key: `has_api_key`); POST /connections → 201;
// PATCH /connections/{id}; DELETE /connections/{id} → 204; GET /connections/{id}/models
// [?refresh=true] → {models[], context_windows?} (502 models_failed); POST
// /connections/discover-models {base_url, api_key} → {models[]} (tries a provider before saving);
// GET|PUT /settings/default-models {language, fast, image, video: {connection_id, model}}.
//
// The API key is write-only: the form never shows one, an empty key field means "unchanged",
// and the kernel forgets the stored key when the base URL changes without a new one.
// A connection's `models` is the user's selection; empty means "whatever the provider lists".

import { html, render, useState, useEffect, useCallback } from '../../vendor/htm/standalone.module.js';
import { errorText } from './review.js';
import { Projects } from './projects.js';
import { PushSettings } from './push.js';

const ROLES = [
  ['language', 'Chat', 'language'],
  ['fast', 'Fast (titles, summaries)', 'language'],
  ['image', 'Image', 'image'],
  ['video', 'Video', 'video'],
];

function splitModels(text) {
  return text.split(/[\s,]+/).map((m) => m.trim()).filter(Boolean);
}

/** A model catalog to pick from, plus free typing for providers that list nothing. */
function ModelPicker({ catalog, selected, onChange, disabled }) {
  const [extra, setExtra] = useState('');
  const toggle = (m) => onChange(selected.includes(m) ? selected.filter((x) => x !== m) : [...selected, m]);
  const others = selected.filter((m) => !(catalog || []).includes(m));
  return html`
    <fieldset class="f-models" disabled=${disabled}>
      <legend class="f-small">Models to offer (none ticked: all the provider lists)</legend>
      ${(catalog || []).length > 12 && html`<p class="f-muted f-small">${catalog.length} models found.</p>`}
      <div class="f-model-list">
        ${[...(catalog || []), ...others].map((m) => html`<label class="f-check" key=${m}>
          <input type="checkbox" checked=${selected.includes(m)} onChange=${() => toggle(m)} /><span class="f-clip">${m}</span></label>`)}
      </div>
      <div class="f-row">
        <input class="f-input f-grow" placeholder="Add a model by name" value=${extra} aria-label="Add a model by name"
               onInput=${(e) => setExtra(e.target.value)} />
        <button type="button" class="f-btn" disabled=${!extra.trim()}
                onClick=${() => { onChange([...new Set([...selected, ...splitModels(extra)])]); setExtra(''); }}>Add</button>
      </div>
    </fieldset>`;
}

/** The add form (no `conn`) or the edit form of one connection. */
function ConnectionForm({ ctx, conn, onSaved, onCancel }) {
  const [name, setName] = useState(conn ? conn.name : '');
  const [type, setType] = useState(conn ? conn.type : 'language');
  const [baseUrl, setBaseUrl] = useState(conn ? conn.base_url : '');
  const [apiKey, setApiKey] = useState('');
  const [models, setModels] = useState(conn ? conn.models || [] : []);
  const [catalog, setCatalog] = useState(null);
  const [busy, setBusy] = useState('');
  const [error, setError] = useState('');
  const [info, setInfo] = useState('');

  async function discover() {
    setBusy('discover');
    setError('');
    setInfo('');
    try {
      const body = { base_url: baseUrl.trim() };
      if (apiKey) body.api_key = apiKey;
      if (conn) body.id = conn.id; // lets the kernel use the stored key for the same URL
      const r = await ctx.api.post('/connections/discover-models', body);
      setCatalog(r.models || []);
      setInfo(`The provider answered: ${(r.models || []).length} model(s).`);
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy('');
    }
  }

  async function save(ev) {
    ev.preventDefault();
    if (!baseUrl.trim()) { setError('A base URL is needed (for example https://api.openai.com/v1).'); return; }
    setBusy('save');
    setError('');
    const body = { name: name.trim() || 'Connection', type, base_url: baseUrl.trim(), models };
    if (apiKey) body.api_key = apiKey;
    if (!conn) { body.kind = 'openai'; body.auth_kind = 'api_key'; }
    try {
      const saved = conn ? await ctx.api.patch(`/connections/${encodeURIComponent(conn.id)}`, body)
        : await ctx.api.post('/connections', body);
      setApiKey(''); // never keep a key around once sent
      if (!conn) { setName(''); setBaseUrl(''); setModels([]); setCatalog(null); setInfo(''); }
      onSaved(saved);
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy('');
    }
  }

  const urlChanged = conn && baseUrl.trim() !== conn.base_url && !apiKey && conn.has_api_key;
  const id = conn ? conn.id : 'new';
  return html`
    <form class="f-form" onSubmit=${save} autocomplete="off">
      <label class="f-field"><span>Name</span>
        <input class="f-input" value=${name} placeholder="OpenAI" data-testid=${conn ? null : 'connection-name'}
               onInput=${(e) => setName(e.target.value)} /></label>
      <label class="f-field"><span>Type</span>
        <select class="f-input" value=${type} onChange=${(e) => setType(e.target.value)}>
          <option value="language">Language</option><option value="image">Image</option>
        </select></label>
      <label class="f-field"><span>Base URL</span>
        <input class="f-input" type="url" inputmode="url" value=${baseUrl} required data-testid=${conn ? null : 'connection-base-url'}
               placeholder="https://api.openai.com/v1" onInput=${(e) => setBaseUrl(e.target.value)} /></label>
      <label class="f-field"><span>API key ${conn && conn.has_api_key ? '(stored; type to replace)' : ''}</span>
        <input class="f-input" type="password" value=${apiKey} autocomplete="new-password" data-testid=${conn ? null : 'connection-api-key'}
               id=${'f-key-' + id} placeholder=${conn && conn.has_api_key ? '•••••••• unchanged' : 'sk-…'}
               onInput=${(e) => setApiKey(e.target.value)} /></label>
      ${urlChanged && html`<p class="f-warn f-small">Changing the base URL forgets the stored key unless you enter one.</p>`}
      <div class="f-row">
        <button type="button" class="f-btn" disabled=${!!busy || !baseUrl.trim()} onClick=${discover}
                data-testid=${conn ? null : 'connection-discover'}>${busy === 'discover' ? 'Asking…' : 'Test & list models'}</button>
      </div>
      ${info && html`<p class="f-ok f-small" role="status">${info}</p>`}
      <${ModelPicker} catalog=${catalog} selected=${models} onChange=${setModels} disabled=${!!busy} />
      ${error && html`<p class="f-error f-small" role="alert">${error}</p>`}
      <div class="f-actions">
        ${onCancel && html`<button type="button" class="f-btn" onClick=${onCancel}>Cancel</button>`}
        <button type="submit" class="f-btn f-btn-primary" disabled=${!!busy}
                data-testid=${conn ? 'connection-save' : 'connection-add'}>
          ${busy === 'save' ? 'Saving…' : conn ? 'Save' : 'Add connection'}</button>
      </div>
    </form>`;
}

function ConnectionItem({ ctx, conn, onChanged }) {
  const [mode, setMode] = useState(''); // '' | 'edit' | 'delete'
  const [test, setTest] = useState(null); // {busy} | {models} | {error}
  const [deleting, setDeleting] = useState(false);

  async function refresh() {
    setTest({ busy: true });
    try {
      const r = await ctx.api.get(`/connections/${encodeURIComponent(conn.id)}/models?refresh=true`);
      setTest({ models: r.models || [] });
    } catch (e) {
      setTest({ error: errorText(e) });
    }
  }

  async function remove() {
    setDeleting(true);
    try {
      await ctx.api.del(`/connections/${encodeURIComponent(conn.id)}`);
      ctx.toast && ctx.toast(`Deleted ${conn.name}`);
      onChanged();
    } catch (e) {
      setTest({ error: errorText(e) });
      setDeleting(false);
    }
  }

  const models = conn.models || [];
  return html`
    <li class="f-card" data-testid="connection-item" data-connection-id=${conn.id}>
      <div class="f-card-head">
        <strong class="f-clip">${conn.name}</strong>
        <span class="f-chip">${conn.type}</span>
        <span class=${'f-chip ' + (conn.has_api_key ? 'f-chip-ok' : '')}>${conn.has_api_key ? 'key set' : 'no key'}</span>
      </div>
      <p class="f-small f-break">${conn.base_url || '(default URL)'}</p>
      <p class="f-small f-muted">${models.length ? `${models.length} model(s): ${models.slice(0, 4).join(', ')}${models.length > 4 ? '…' : ''}` : "Models: all the provider lists"}</p>
      ${test && test.busy && html`<p class="f-muted f-small">Asking the provider…</p>`}
      ${test && test.models && html`<p class="f-ok f-small" role="status" data-testid="connection-test-ok">Reachable: ${test.models.length} model(s)${test.models.length ? ` — ${test.models.slice(0, 6).join(', ')}${test.models.length > 6 ? '…' : ''}` : ''}.</p>`}
      ${test && test.error && html`<p class="f-error f-small" role="alert">${test.error}</p>`}
      ${mode === 'edit' && html`<${ConnectionForm} ctx=${ctx} conn=${conn}
          onSaved=${() => { setMode(''); onChanged(); }} onCancel=${() => setMode('')} />`}
      ${mode === 'delete' && html`<div class="f-confirm" role="alertdialog" aria-label="Delete connection">
          <p class="f-small">Delete ${conn.name}? Sessions using it keep their model but lose the connection.</p>
          <div class="f-actions">
            <button type="button" class="f-btn" onClick=${() => setMode('')}>Cancel</button>
            <button type="button" class="f-btn f-btn-danger" disabled=${deleting} data-testid="connection-delete-confirm"
                    onClick=${remove}>${deleting ? 'Deleting…' : 'Delete'}</button>
          </div></div>`}
      ${!mode && html`<div class="f-actions">
        <button type="button" class="f-btn" disabled=${test && test.busy} onClick=${refresh} data-testid="connection-test">Test</button>
        <button type="button" class="f-btn" onClick=${() => setMode('edit')} data-testid="connection-edit">Edit</button>
        <button type="button" class="f-btn f-btn-danger" onClick=${() => setMode('delete')} data-testid="connection-delete">Delete</button>
      </div>`}
    </li>`;
}

/** One select per purpose; options grouped by connection of the matching type. */
function DefaultModels({ ctx, connections }) {
  const [defaults, setDefaults] = useState(null);
  const [catalogs, setCatalogs] = useState({}); // id → models (stored selection or provider list)
  const [error, setError] = useState('');
  const [saving, setSaving] = useState('');

  useEffect(() => {
    ctx.api.get('/settings/default-models').then(setDefaults, (e) => setError(errorText(e)));
  }, []);

  // A connection with no stored selection offers what its provider lists: ask once per
  // connection, quietly (an unreachable provider just offers nothing).
  useEffect(() => {
    let live = true;
    for (const c of connections) {
      if ((c.models || []).length || catalogs[c.id]) continue;
      ctx.api.get(`/connections/${encodeURIComponent(c.id)}/models`).then(
        (r) => { if (live) setCatalogs((prev) => ({ ...prev, [c.id]: r.models || [] })); },
        () => { if (live) setCatalogs((prev) => ({ ...prev, [c.id]: [] })); });
    }
    return () => { live = false; };
  }, [connections]);

  async function choose(role, value) {
    const [connection_id, model] = value ? JSON.parse(value) : ['', ''];
    const next = { ...defaults, [role]: { connection_id, model } };
    setSaving(role);
    setError('');
    try {
      setDefaults(await ctx.api.put('/settings/default-models', next));
      ctx.toast && ctx.toast('Default model saved');
    } catch (e) {
      setError(errorText(e));
    } finally {
      setSaving('');
    }
  }

  if (!defaults) return error ? html`<p class="f-error">${error}</p>` : html`<p class="f-muted">Loading…</p>`;
  return html`
    <div class="f-defaults">
      ${ROLES.map(([role, label, type]) => {
        const cur = defaults[role] || { connection_id: '', model: '' };
        const curValue = cur.connection_id ? JSON.stringify([cur.connection_id, cur.model]) : '';
        const usable = connections.filter((c) => c.type === type);
        if (type !== 'language' && !usable.length && !curValue) return null; // nothing to pick
        const listed = usable.some((c) => ((c.models || []).length ? c.models : catalogs[c.id] || []).includes(cur.model) && c.id === cur.connection_id);
        return html`<label class="f-field" key=${role}><span>${label}</span>
          <select class="f-input" data-testid=${role === 'language' ? 'default-model' : 'default-model-' + role}
                  data-role=${role} value=${curValue} disabled=${saving === role}
                  onChange=${(e) => choose(role, e.target.value)}>
            <option value="">${role === 'language' ? 'First connection, first model' : 'None'}</option>
            ${curValue && !listed && html`<option value=${curValue}>${cur.model || '(no model)'}</option>`}
            ${usable.map((c) => html`<optgroup label=${c.name} key=${c.id}>
              ${((c.models || []).length ? c.models : catalogs[c.id] || []).map((m) =>
                html`<option value=${JSON.stringify([c.id, m])}>${m}</option>`)}
            </optgroup>`)}
          </select></label>`;
      })}
      ${error && html`<p class="f-error f-small" role="alert">${error}</p>`}
    </div>`;
}

function SettingsView({ ctx }) {
  const [connections, setConnections] = useState(null);
  const [error, setError] = useState('');

  const load = useCallback(async () => {
    try {
      setConnections(await ctx.api.get('/connections'));
      setError('');
    } catch (e) {
      setError(errorText(e));
    }
  }, []);
  useEffect(() => { load(); }, [load]);

  return html`
    <section class="f-view f-settings" data-testid="settings">
      <header class="f-view-head">
        <a class="f-btn f-btn-ghost" href="#/">← Chats</a>
        <h2 class="f-title">Settings</h2>
      </header>
      <h3 class="f-subtitle">Connections</h3>
      <p class="f-muted f-small">OpenAI-compatible providers. Keys are stored by the kernel and never shown again.</p>
      ${error && html`<p class="f-error" role="alert">${error}</p>`}
      ${connections && !connections.length && html`<p class="f-empty">No connection yet: add one below.</p>`}
      ${connections && html`<ul class="f-cards">
        ${connections.map((c) => html`<${ConnectionItem} key=${c.id} ctx=${ctx} conn=${c} onChanged=${load} />`)}
      </ul>`}
      <div class="f-card">
        <h4 class="f-card-title">Add a connection</h4>
        <${ConnectionForm} ctx=${ctx} onSaved=${(c) => { ctx.toast && ctx.toast(`Added ${c.name}`); load(); }} />
      </div>
      <h3 class="f-subtitle">Default models</h3>
      <p class="f-muted f-small">New chats use the chat default unless you pick a model.</p>
      ${connections && html`<${DefaultModels} ctx=${ctx} connections=${connections} />`}
      <h3 class="f-subtitle">Projects</h3>
      <p class="f-muted f-small">Directories on the kernel's machine that chats can work in.</p>
      <${Projects} ctx=${ctx} />
      <h3 class="f-subtitle">Notifications</h3>
      <p class="f-muted f-small">Approvals, questions and finished replies, on a device even while its browser is closed.</p>
      <${PushSettings} ctx=${ctx} />
    </section>`;
}

/** Contract entry point: the settings page. */
export function mount(el, ctx) {
  render(html`<${SettingsView} ctx=${ctx} />`, el);
  return () => render(null, el);
}
