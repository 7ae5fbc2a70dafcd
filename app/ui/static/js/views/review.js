// File review: the agent's file changes nobody has looked at yet, kept or undone.
//
// Routes: GET /sessions/{id}/file-review → {files[], file_state_token, through_seq};
// POST /sessions/{id}/file-review {action: keep|undo, expected_through_seq,
// expected_file_state, force_file_keys?} → {status: "resolved"}.
//
// The kernel resolves every pending change at once (there is no per-file keep/undo route).
// What one can choose per file is the fate of a file edited since the agent's change
// (`modified`): an undo leaves it alone unless its key is in `force_file_keys`. So the per-file
// control is "keep mine / undo anyway" on those files, and the two buttons act on all files.
//
// Also exports the small pieces rewind.js reuses (Diff, FileRow parts, errorText).

import { html, render, useState, useEffect, useCallback } from '../../vendor/htm/standalone.module.js';

/** A readable line for an ApiError (or anything thrown). */
export function errorText(err) {
  if (!err) return '';
  if (err.code && err.message) return `${err.message} (${err.code})`;
  return err.message || String(err);
}

/** The payload of a session event, whether the core hands us the envelope or the payload. */
export function payloadOf(data) {
  if (data && typeof data === 'object' && 'kind' in data && 'payload' in data) return data.payload;
  return data;
}

/** "dir/" and "name" of a path, so a long directory can be cut first on a narrow screen. */
export function splitPath(path) {
  const i = path.lastIndexOf('/');
  return i < 0 ? ['', path] : [path.slice(0, i + 1), path.slice(i + 1)];
}

/** `path` relative to the session's workspace `root` (file changes carry absolute paths). */
export function relPath(path, root) {
  if (!root) return path;
  const dir = root.endsWith('/') ? root : root + '/';
  return path.startsWith(dir) ? path.slice(dir.length) : path;
}

/** The session's workspace directory (GET /sessions/{id}/workspace → {path, …}), '' until known. */
export function useWorkspaceRoot(ctx) {
  const [root, setRoot] = useState('');
  useEffect(() => {
    let live = true;
    ctx.api.get(`/sessions/${encodeURIComponent(ctx.sessionId)}/workspace`)
      .then((w) => { if (live && w && w.path) setRoot(w.path); }, () => {});
    return () => { live = false; };
  }, [ctx.sessionId]);
  return root;
}

// Diffs of generated files can be huge: render the first lines and let the user ask for more,
// so opening a review never stalls a phone.
const DIFF_PREVIEW_LINES = 400;

function lineClass(line) {
  if (line.startsWith('+++') || line.startsWith('---')) return 'f-diff-meta';
  if (line.startsWith('@@')) return 'f-diff-hunk';
  if (line.startsWith('+')) return 'f-diff-add';
  if (line.startsWith('-')) return 'f-diff-del';
  if (line.startsWith('\\')) return 'f-diff-meta';
  return 'f-diff-ctx';
}

/** A unified diff, one block per line, colored by class; the only place that scrolls sideways. */
export function Diff({ text }) {
  const [all, setAll] = useState(false);
  if (!text) return html`<p class="f-muted f-small">No textual difference (binary file or mode only).</p>`;
  const lines = text.replace(/\n$/, '').split('\n');
  const shown = all ? lines : lines.slice(0, DIFF_PREVIEW_LINES);
  return html`
    <div class="f-diff-wrap">
      <pre class="f-diff"><code>${shown.map((l) => html`<span class=${lineClass(l)}>${l || ' '}</span>`)}</code></pre>
      ${shown.length < lines.length &&
      html`<button type="button" class="f-btn f-btn-ghost" onClick=${() => setAll(true)}>
        Show all ${lines.length} lines</button>`}
    </div>`;
}

/** +N −M counts. */
export function Counts({ file }) {
  return html`<span class="f-counts"><span class="f-add">+${file.additions}</span> <span class="f-del">−${file.deletions}</span></span>`;
}

const REVIEW_STATUS = {
  ready: ['As the agent left it', 'f-chip-ok'],
  mergeable: ['Edited since — undo merges', 'f-chip-info'],
  modified: ['Edited since — conflicts', 'f-chip-warn'],
};

// What each file became, by action (the kernel's FileAction, plus "reviewed" for keep).
export const ACTION_LABEL = {
  reviewed: 'Kept',
  restored: 'Undone',
  merged: 'Undone (merged with later edits)',
  kept: 'Left as is (edited since)',
  force_restored: 'Undone (later edits overwritten)',
};

// Mirrors the kernel's filestate.action: the outcome of an undo per file is determined by its
// status and whether it was forced, so the view can show it without another request.
export function undoAction(file, forced) {
  if (file.status === 'modified') return forced.has(file.key) ? 'force_restored' : 'kept';
  return file.status === 'mergeable' ? 'merged' : 'restored';
}

function ReviewFile({ file, forced, onForce, busy, root }) {
  const [dir, name] = splitPath(relPath(file.path, root));
  const [label, chip] = REVIEW_STATUS[file.status] || [file.status, ''];
  const isForced = forced.has(file.key);
  return html`
    <li class="f-file" data-testid="review-file" data-path=${file.path} data-status=${file.status}>
      <details>
        <summary class="f-file-head">
          <span class="f-path"><span class="f-path-name">${name}</span>
            ${dir && html`<span class="f-path-dir">${dir}</span>`}</span>
          <${Counts} file=${file} />
        </summary>
        <${Diff} text=${file.diff} />
      </details>
      <div class="f-file-state">
        <span class=${'f-chip ' + chip}>${label}</span>
        ${file.status === 'modified' && html`
          <label class="f-check">
            <input type="checkbox" checked=${isForced} disabled=${busy} onChange=${() => onForce(file.key)} />
            <span>${isForced ? 'Undo anyway (overwrites later edits)' : 'Keep my later edits on undo'}</span>
          </label>`}
      </div>
    </li>`;
}

/** What the last keep/undo did, file by file (the pending list above it is reloaded). */
function Outcome({ done, onDismiss, root }) {
  return html`
    <div class="f-card" data-testid="review-outcome" data-action=${done.action} role="status">
      <p class="f-ok">${done.action === 'keep' ? 'Changes kept.' : 'Changes undone.'}</p>
      <ul class="f-list">
        ${done.files.map((f) => html`<li class="f-list-item" key=${f.path} data-path=${f.path} data-action=${f.outcome}>
          <span class="f-grow f-clip f-path-name">${relPath(f.path, root)}</span>
          <span class="f-chip f-chip-done">${ACTION_LABEL[f.outcome] || f.outcome}</span></li>`)}
      </ul>
      <div class="f-actions"><button type="button" class="f-btn" onClick=${onDismiss}>Dismiss</button></div>
    </div>`;
}

function ReviewView({ ctx }) {
  const sid = ctx.sessionId;
  const base = `/sessions/${encodeURIComponent(sid)}/file-review`;
  const [review, setReview] = useState(null); // the GET answer
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(''); // '' | 'load' | 'keep' | 'undo'
  const [forced, setForced] = useState(() => new Set());
  const [done, setDone] = useState(null); // {action, files: [{path, outcome}]}
  const root = useWorkspaceRoot(ctx);

  const load = useCallback(async () => {
    setBusy((b) => b || 'load');
    try {
      const r = await ctx.api.get(base);
      setReview(r);
      // Forced keys must name listed files (400 otherwise): drop the ones no longer listed.
      setForced((prev) => new Set([...prev].filter((k) => r.files.some((f) => f.key === k))));
      return true;
    } catch (e) {
      setError(errorText(e));
      return false;
    } finally {
      setBusy((b) => (b === 'load' ? '' : b));
    }
  }, [base]);

  useEffect(() => { load(); }, [load]);

  // New changes (a tool wrote a file) or another client resolving/rewinding make the list
  // stale: reload, debounced.
  useEffect(() => {
    if (!ctx.events) return undefined;
    let timer = 0;
    const stale = (kind) => (data) => {
      if (kind === 'tool_end' && !(payloadOf(data) || {}).diff) return; // no file changed
      clearTimeout(timer);
      timer = setTimeout(load, 400);
    };
    const offs = ['tool_end', 'file_review_resolved', 'history_rewound'].map((k) => ctx.events.on(k, stale(k)));
    return () => { clearTimeout(timer); offs.forEach((off) => off && off()); };
  }, [load]);

  const toggleForce = (key) => setForced((prev) => {
    const next = new Set(prev);
    if (next.has(key)) next.delete(key); else next.add(key);
    return next;
  });

  async function resolve(action) {
    if (!review || !review.files.length) return;
    setBusy(action);
    setError('');
    setDone(null);
    const body = { action, expected_through_seq: review.through_seq, expected_file_state: review.file_state_token };
    if (action === 'undo' && forced.size) body.force_file_keys = [...forced];
    try {
      await ctx.api.post(base, body);
      const files = review.files.map((f) => ({ path: f.path, outcome: action === 'keep' ? 'reviewed' : undoAction(f, forced) }));
      setDone({ action, files });
      setForced(new Set());
      ctx.toast && ctx.toast(action === 'keep' ? `Kept ${files.length} file(s)` : `Undid changes in ${files.length} file(s)`);
      await load();
    } catch (e) {
      // The list moved under us (new changes, or a file edited since): show the fresh list and
      // say why, rather than acting on something the user did not see.
      if (e && ['file_review_changed', 'file_state_changed', 'no_pending_file_changes'].includes(e.code)) {
        await load();
        setError(`${errorText(e)} — the list was reloaded; check it and try again.`);
      } else {
        setError(errorText(e));
      }
    } finally {
      setBusy('');
    }
  }

  const files = review ? review.files : [];
  const conflicts = files.filter((f) => f.status === 'modified').length;
  return html`
    <section class="f-view f-review" data-testid="review" aria-busy=${busy ? 'true' : 'false'}>
      <header class="f-view-head">
        <a class="f-btn f-btn-ghost" href=${`#/s/${encodeURIComponent(sid)}`}>← Chat</a>
        <h2 class="f-title">File review</h2>
        <button type="button" class="f-btn f-btn-ghost" onClick=${() => { setError(''); load(); }}
                disabled=${!!busy} aria-label="Reload">↻</button>
      </header>
      ${error && html`<p class="f-error" role="alert">${error}</p>`}
      ${done && html`<${Outcome} done=${done} root=${root} onDismiss=${() => setDone(null)} />`}
      ${busy === 'load' && !review && html`<p class="f-muted">Loading…</p>`}
      ${review && !files.length && html`<p class="f-empty">No file changes to review.</p>`}
      ${files.length > 0 && html`
        <p class="f-muted f-small">${files.length} file(s) changed by the agent. Open one to see its diff.
          ${conflicts > 0 && ` ${conflicts} edited since: an undo keeps your edits unless you tick "undo anyway".`}</p>
        <ul class="f-files">
          ${files.map((f) => html`<${ReviewFile} key=${f.key} file=${f} forced=${forced} onForce=${toggleForce} busy=${!!busy} root=${root} />`)}
        </ul>
        <div class="f-actions f-sticky">
          <button type="button" class="f-btn f-btn-primary" data-testid="review-keep"
                  disabled=${!!busy} onClick=${() => resolve('keep')}>
            ${busy === 'keep' ? 'Keeping…' : `Keep all (${files.length})`}</button>
          <button type="button" class="f-btn f-btn-danger" data-testid="review-undo"
                  disabled=${!!busy} onClick=${() => resolve('undo')}>
            ${busy === 'undo' ? 'Undoing…' : `Undo all (${files.length})`}</button>
        </div>`}
    </section>`;
}

/** Contract entry point: render the review of `ctx.sessionId` into `el`. */
export function mount(el, ctx) {
  render(html`<${ReviewView} ctx=${ctx} />`, el);
  return () => render(null, el);
}
