// A new chat: connection, model, approval mode, reasoning effort and project, then POST
// /sessions and open it.
//
// Routes: GET /connections (language ones only: a session needs a language model),
// GET /connections/{id}/models → {models[]}, GET /settings/default-models → {language:
// {connection_id, model}, …} (preselected), GET /projects, POST /sessions {connection_id,
// model, approval_mode, reasoning_effort?, project_id?} → Session.

import { html, useState, useEffect } from '../../vendor/htm/standalone.module.js';
import api from '../api.js';

const enc = encodeURIComponent;

const APPROVALS = [
  ['manual', 'Ask me before writing, running or going online'],
  ['auto', 'A guardian model decides'],
  ['full_access', 'Allow everything'],
];

export function NewChat({ navigate, onCreated, toast }) {
  const [connections, setConnections] = useState(null);
  const [projects, setProjects] = useState([]);
  const [defaults, setDefaults] = useState(null);
  const [connection, setConnection] = useState('');
  const [models, setModels] = useState([]);
  const [model, setModel] = useState('');
  const [modelsError, setModelsError] = useState('');
  const [approval, setApproval] = useState('manual');
  const [effort, setEffort] = useState('');
  const [project, setProject] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    let live = true;
    Promise.all([
      api.get('/connections'),
      api.get('/settings/default-models').catch(() => null),
      api.get('/projects').catch(() => []),
    ]).then(([list, defs, projs]) => {
      if (!live) return;
      const language = (list || []).filter((c) => !c.type || c.type === 'language');
      setConnections(language);
      setDefaults(defs);
      setProjects(Array.isArray(projs) ? projs : []);
      const preferred = defs && defs.language && language.find((c) => c.id === defs.language.connection_id);
      setConnection((preferred || language[0] || {}).id || '');
    }, (e) => live && setError(e.message || String(e)));
    return () => { live = false; };
  }, []);

  // The models of the chosen connection; the default model when it is this connection's.
  useEffect(() => {
    if (!connection) return undefined;
    let live = true;
    setModelsError('');
    const saved = ((connections || []).find((c) => c.id === connection) || {}).models || [];
    setModels(saved);
    api.get(`/connections/${enc(connection)}/models`).then((r) => {
      if (!live) return;
      const list = (r && r.models) || saved;
      setModels(list);
      const def = defaults && defaults.language && defaults.language.connection_id === connection ? defaults.language.model : '';
      setModel((m) => (list.includes(m) ? m : def && list.includes(def) ? def : list[0] || def || ''));
    }, (e) => {
      if (!live) return;
      setModelsError(`Models could not be listed (${e.message}); type one.`);
      setModel((m) => m || saved[0] || '');
    });
    return () => { live = false; };
  }, [connection, connections, defaults]);

  async function create(e) {
    e.preventDefault();
    setBusy(true);
    setError('');
    const body = { approval_mode: approval };
    if (connection) body.connection_id = connection;
    if (model.trim()) body.model = model.trim();
    if (effort) body.reasoning_effort = effort;
    if (project) body.project_id = project;
    try {
      const s = await api.post('/sessions', body);
      onCreated && onCreated(s);
      navigate(`#/s/${enc(s.id)}`);
    } catch (err) {
      setError(err.message || String(err));
      setBusy(false);
    }
  }

  const none = connections && !connections.length;
  return html`
    <section class="page newchat">
      <header class="bar">
        <a class="icon-btn back" href="#/" aria-label="Back to chats">←</a>
        <h1 class="bar-title">New chat</h1>
      </header>
      <form class="page-body form" onSubmit=${create}>
        ${none && html`<p class="notice">No model connection yet. <a href="#/settings">Add one in settings</a>.</p>`}
        <label class="field">
          <span class="field-label">Connection</span>
          <select class="input" data-testid="newchat-connection" value=${connection}
            onChange=${(e) => setConnection(e.currentTarget.value)} disabled=${!connections || none}>
            ${(connections || []).map((c) => html`<option value=${c.id}>${c.name || c.base_url || c.id}</option>`)}
          </select>
        </label>
        <label class="field">
          <span class="field-label">Model</span>
          ${models.length && !modelsError
            ? html`<select class="input" data-testid="newchat-model" value=${model} onChange=${(e) => setModel(e.currentTarget.value)}>
                ${models.map((m) => html`<option value=${m}>${m}</option>`)}
              </select>`
            : html`<input class="input" data-testid="newchat-model" value=${model} placeholder="model name"
                autocapitalize="off" spellcheck="false" onInput=${(e) => setModel(e.currentTarget.value)} />`}
          ${modelsError && html`<span class="hint">${modelsError}</span>`}
        </label>
        <label class="field">
          <span class="field-label">Approvals</span>
          <select class="input" data-testid="newchat-approval" value=${approval} onChange=${(e) => setApproval(e.currentTarget.value)}>
            ${APPROVALS.map(([v, label]) => html`<option value=${v}>${v.replace('_', ' ')} — ${label}</option>`)}
          </select>
        </label>
        <label class="field">
          <span class="field-label">Reasoning effort</span>
          <select class="input" data-testid="newchat-effort" value=${effort} onChange=${(e) => setEffort(e.currentTarget.value)}>
            <option value="">Model default</option>
            <option value="low">Low</option>
            <option value="medium">Medium</option>
            <option value="high">High</option>
          </select>
        </label>
        <label class="field">
          <span class="field-label">Project</span>
          <select class="input" data-testid="newchat-project" value=${project} onChange=${(e) => setProject(e.currentTarget.value)}>
            <option value="">No project (a private workspace)</option>
            ${projects.map((p) => html`<option value=${p.id}>${p.name || p.path}</option>`)}
          </select>
        </label>
        ${error && html`<p class="error" role="alert">${error}</p>`}
        <button class="btn btn-primary btn-wide" type="submit" data-testid="newchat-create" disabled=${busy || !connections}>
          ${busy ? 'Creating…' : 'Start chat'}
        </button>
      </form>
    </section>`;
}
