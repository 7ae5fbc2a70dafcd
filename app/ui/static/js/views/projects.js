// Projects (a section of the settings page): directories on the kernel's machine that chats
// work in, and their trust.
//
// Routes: GET /projects → ProjectInfo[] {id, name, path, pinned, available, …}; POST /projects
// {path, name?} → 201; PATCH /projects/{id} {name?, pinned?}; DELETE /projects/{id} → 204 (its
// chats too, never the directory); GET /projects/{id}/trust → {state: trusted|untrusted|none,
// digest, files[], runs[{file, event, command}], errors[]}; PUT …/trust {digest} (409
// trust_digest_changed when the files changed since they were shown); DELETE …/trust → the
// same shape.
//
// A project's own executable files (its hooks) never run before the user trusts them: the
// trust card shows every command they would run, and Trust sends the digest of exactly what
// was shown.

import { html, useState, useEffect, useCallback } from '../../vendor/htm/standalone.module.js';
import { errorText } from './review.js';

const enc = encodeURIComponent;
const STATE = { trusted: ['Trusted', 'f-chip-ok'], untrusted: ['Not trusted', 'f-chip-warn'], none: ['Nothing to run', ''] };

function Trust({ ctx, project, onState }) {
  const [trust, setTrust] = useState(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const base = `/projects/${enc(project.id)}/trust`;
  const load = useCallback(() => ctx.api.get(base).then(setTrust, (e) => setError(errorText(e))), [base]);
  useEffect(() => { load(); }, [load]);

  async function change(trusting) {
    setBusy(true);
    setError('');
    try {
      const now = await (trusting ? ctx.api.put(base, { digest: trust.digest }) : ctx.api.del(base));
      setTrust(now);
      onState(now.state);
    } catch (e) {
      setError(errorText(e));
      if (e && e.code === 'trust_digest_changed') load(); // show what is there now
    } finally {
      setBusy(false);
    }
  }

  if (!trust) return error ? html`<p class="f-error f-small" role="alert">${error}</p>` : html`<p class="f-muted f-small">Reading its files…</p>`;
  return html`<div class="f-confirm" data-testid="project-trust" data-state=${trust.state}>
    ${trust.runs.length ? html`<p class="f-small">It would run:</p>
      <ul class="f-small f-break">${trust.runs.map((r, i) => html`<li key=${i}><code>${r.command}</code> <span class="f-muted">(${r.event}, ${r.file})</span></li>`)}</ul>`
      : html`<p class="f-muted f-small">It has no executable configuration.</p>`}
    ${trust.errors.length > 0 && html`<p class="f-error f-small">${trust.errors.join('; ')}</p>`}
    ${error && html`<p class="f-error f-small" role="alert">${error}</p>`}
    ${trust.state === 'untrusted' && html`<button type="button" class="f-btn f-btn-primary" data-testid="project-trust-grant"
      disabled=${busy} onClick=${() => change(true)}>Trust these files</button>`}
    ${trust.state === 'trusted' && html`<button type="button" class="f-btn" data-testid="project-trust-revoke"
      disabled=${busy} onClick=${() => change(false)}>Withdraw trust</button>`}
  </div>`;
}

function ProjectItem({ ctx, project, trustState, onTrust, onChanged }) {
  const [mode, setMode] = useState(''); // '' | 'rename' | 'delete' | 'trust'
  const [name, setName] = useState(project.name || '');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const path = `/projects/${enc(project.id)}`;

  async function act(fn) {
    setBusy(true);
    setError('');
    try {
      await fn();
      setMode('');
      onChanged();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  }
  const [label, chip] = STATE[trustState] || ['', ''];
  return html`<li class="f-card" data-testid="project-item" data-project-id=${project.id}>
    <div class="f-card-head">
      <strong class="f-clip">${project.pinned ? '★ ' : ''}${project.name || 'Project'}</strong>
      ${!project.available && html`<span class="f-chip f-chip-warn">missing</span>`}
      ${label && html`<span class=${'f-chip ' + chip}>${label}</span>`}
    </div>
    <p class="f-small f-break">${project.path}</p>
    ${mode === 'rename' && html`<form class="f-row" onSubmit=${(e) => { e.preventDefault(); act(() => ctx.api.patch(path, { name: name.trim() })); }}>
      <input class="f-input" aria-label="Project name" value=${name} onInput=${(e) => setName(e.currentTarget.value)} />
      <button class="f-btn f-btn-primary" type="submit" disabled=${busy || !name.trim()}>Save</button>
      <button class="f-btn" type="button" onClick=${() => setMode('')}>Cancel</button></form>`}
    ${mode === 'delete' && html`<div class="f-confirm" role="alertdialog" aria-label="Delete project">
      <p class="f-small">Delete ${project.name || 'this project'} and its chats? Its directory stays as it is.</p>
      <div class="f-actions">
        <button type="button" class="f-btn" onClick=${() => setMode('')}>Cancel</button>
        <button type="button" class="f-btn f-btn-danger" data-testid="project-delete-confirm" disabled=${busy}
          onClick=${() => act(() => ctx.api.del(path))}>Delete</button>
      </div></div>`}
    ${mode === 'trust' && html`<${Trust} ctx=${ctx} project=${project} onState=${(st) => onTrust(project.id, st)} />`}
    ${error && html`<p class="f-error f-small" role="alert">${error}</p>`}
    ${mode !== 'rename' && mode !== 'delete' && html`<div class="f-actions">
      <button type="button" class="f-btn" data-testid="project-trust-open" onClick=${() => setMode(mode === 'trust' ? '' : 'trust')}>
        ${mode === 'trust' ? 'Close' : 'Trust…'}</button>
      <button type="button" class="f-btn" disabled=${busy} onClick=${() => act(() => ctx.api.patch(path, { pinned: !project.pinned }))}>
        ${project.pinned ? 'Unpin' : 'Pin'}</button>
      <button type="button" class="f-btn" onClick=${() => { setName(project.name || ''); setMode('rename'); }}>Rename</button>
      <button type="button" class="f-btn f-btn-danger" data-testid="project-delete" onClick=${() => setMode('delete')}>Delete</button>
    </div>`}
  </li>`;
}

function AddProject({ ctx, onAdded }) {
  const [path, setPath] = useState('');
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  async function add(e) {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const body = { path: path.trim() };
      if (name.trim()) body.name = name.trim();
      const p = await ctx.api.post('/projects', body);
      setPath('');
      setName('');
      onAdded(p);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  }
  return html`<form class="f-card" onSubmit=${add}>
    <h4 class="f-card-title">Add a project</h4>
    <label class="f-field"><span>Directory on the kernel's machine</span>
      <input class="f-input" data-testid="project-path" required placeholder="/home/me/code/app" value=${path}
        onInput=${(e) => setPath(e.currentTarget.value)} /></label>
    <label class="f-field"><span>Name (optional)</span>
      <input class="f-input" data-testid="project-name" value=${name} onInput=${(e) => setName(e.currentTarget.value)} /></label>
    ${error && html`<p class="f-error f-small" role="alert">${error}</p>`}
    <div class="f-actions"><button class="f-btn f-btn-primary" type="submit" data-testid="project-add" disabled=${busy || !path.trim()}>Add</button></div>
  </form>`;
}

/** The projects section: list, add, rename, pin, delete, trust. */
export function Projects({ ctx }) {
  const [projects, setProjects] = useState(null);
  const [trust, setTrust] = useState({}); // id → state, for the chips
  const [error, setError] = useState('');
  const load = useCallback(async () => {
    try {
      const list = await ctx.api.get('/projects');
      setProjects(list);
      setError('');
      const states = await Promise.all(list.map((p) => ctx.api.get(`/projects/${enc(p.id)}/trust`).then((t) => t.state, () => '')));
      setTrust(Object.fromEntries(list.map((p, i) => [p.id, states[i]])));
    } catch (e) {
      setError(errorText(e));
    }
  }, []);
  useEffect(() => { load(); }, [load]);
  return html`<div data-testid="projects">
    ${error && html`<p class="f-error" role="alert">${error}</p>`}
    ${projects && !projects.length && html`<p class="f-empty">No project yet. A chat without one works in a directory of its own.</p>`}
    ${projects && html`<ul class="f-cards">${projects.map((p) => html`<${ProjectItem} key=${p.id} ctx=${ctx} project=${p}
      trustState=${trust[p.id]} onTrust=${(id, st) => setTrust((t) => ({ ...t, [id]: st }))} onChanged=${load} />`)}</ul>`}
    <${AddProject} ctx=${ctx} onAdded=${(p) => { ctx.toast && ctx.toast(`Added ${p.name}`); load(); }} />
  </div>`;
}
