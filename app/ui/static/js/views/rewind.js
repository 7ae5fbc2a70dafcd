// Rewind: take the session back to before one of its user messages, restoring the files the
// agent changed since.
//
// Route: POST /sessions/{id}/turns/{seq}/rewind.
//   {} → preview {status: "confirmation_required", message, files[], file_state_token, head_seq}
//   {confirm: true, expected_head_seq, expected_file_state, force_file_keys?} → {status: "rewound",
//   message, files[] (with action), …}
// Each file: {key, path, status: ready|mergeable|modified, additions, deletions, diff} — the diff
// is what restoring would apply. A `modified` file (edited since, conflicting) is kept unless its
// key is forced.
//
// `mountRewind(el, ctx, message)` opens the dialog for one user message (the core's "Rewind"
// button); `mount(el, ctx)` lists the session's user messages to pick one from.

import { html, render, useState, useEffect } from '../../vendor/htm/standalone.module.js';
import { Diff, Counts, errorText, splitPath, relPath, useWorkspaceRoot } from './review.js';

const STATUS = {
  ready: ['Will restore', 'f-chip-ok'],
  mergeable: ['Edited since — will merge', 'f-chip-info'],
  modified: ['Edited since — conflict', 'f-chip-warn'],
};

// What a confirmed rewind did to each file (the kernel's FileAction).
const DONE = {
  restored: 'Restored',
  merged: 'Restored, your later edits merged in',
  kept: 'Kept as it is (conflict)',
  force_restored: 'Force-restored',
};

// 409s after which a fresh preview is the answer: the history or the files moved since.
const STALE = ['history_changed', 'file_state_changed', 'file_changed'];

function seqOf(message) {
  if (!message) return 0;
  return Number(message.seq ?? message.event_seq ?? message.data_seq ?? 0);
}

// The rewound text goes back to the composer, replacing the draft (as the desktop does). The
// contract gives no ctx hook for it, so: fill the composer found by its contract testid (firing
// `input` so the core's state follows) and announce it with an event the core may listen to.
function toComposer(text, sessionId, seq) {
  const box = document.querySelector('[data-testid="composer-input"]');
  if (box) {
    const setter = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value').set;
    setter.call(box, text);
    box.dispatchEvent(new Event('input', { bubbles: true }));
  }
  window.dispatchEvent(new CustomEvent('foya:rewound', { detail: { sessionId, seq, message: text } }));
}

function RewindFile({ file, forced, onForce, busy, root }) {
  const [dir, name] = splitPath(relPath(file.path, root));
  const [label, chip] = STATUS[file.status] || [file.status, ''];
  const conflict = file.status === 'modified';
  const isForced = forced.has(file.key);
  return html`
    <li class=${'f-file' + (conflict ? ' f-file-conflict' : '')} data-path=${file.path}
        data-status=${file.status} data-action=${file.action || ''}
        data-testid=${conflict ? 'rewind-conflict' : null}>
      <details>
        <summary class="f-file-head">
          <span class="f-path"><span class="f-path-name">${name}</span>
            ${dir && html`<span class="f-path-dir">${dir}</span>`}</span>
          <${Counts} file=${file} />
        </summary>
        <${Diff} text=${file.diff} />
      </details>
      <div class="f-file-state">
        ${file.action
          ? html`<span class="f-chip f-chip-done">${DONE[file.action] || file.action}</span>`
          : html`<span class=${'f-chip ' + chip}>${label}</span>`}
        ${!file.action && conflict && html`
          <label class="f-check">
            <input type="checkbox" checked=${isForced} disabled=${busy} onChange=${() => onForce(file.key)} />
            <span>${isForced ? 'Force restore (overwrites later edits)' : 'Keep current file'}</span>
          </label>`}
      </div>
    </li>`;
}

/** The dialog: preview → confirm → outcome. `onClose` removes it. */
function RewindDialog({ ctx, message, onClose }) {
  const sid = ctx.sessionId;
  const seq = seqOf(message);
  const path = `/sessions/${encodeURIComponent(sid)}/turns/${seq}/rewind`;
  const [preview, setPreview] = useState(null);
  const [result, setResult] = useState(null);
  const [error, setError] = useState('');
  const [notice, setNotice] = useState('');
  const [busy, setBusy] = useState(true);
  const [forced, setForced] = useState(() => new Set());
  const root = useWorkspaceRoot(ctx);

  async function loadPreview() {
    setBusy(true);
    setError('');
    try {
      const p = await ctx.api.post(path, {});
      setPreview(p);
      setForced((prev) => new Set([...prev].filter((k) => p.files.some((f) => f.key === k && f.status === 'modified'))));
    } catch (e) {
      setPreview(null);
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  }

  useEffect(() => {
    if (seq > 0) loadPreview(); else { setBusy(false); setError('This message has no stored seq yet; wait until it is saved.'); }
  }, [path]);

  // Escape closes the dialog unless a rewind is being written (it cannot be taken back midway).
  useEffect(() => {
    const onKey = (ev) => { if (ev.key === 'Escape' && !busy) onClose(); };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [busy]);

  async function confirm() {
    if (!preview) return;
    setBusy(true);
    setError('');
    setNotice('');
    const body = { confirm: true, expected_head_seq: preview.head_seq, expected_file_state: preview.file_state_token };
    if (forced.size) body.force_file_keys = [...forced];
    try {
      const r = await ctx.api.post(path, body);
      setResult(r);
      toComposer(r.message, sid, seq);
      ctx.toast && ctx.toast('Rewound; the message is back in the composer');
    } catch (e) {
      if (e && STALE.includes(e.code)) {
        // Never confirm something the user did not see: show the new preview and say why.
        await loadPreview();
        setNotice(`${errorText(e)} — here is the new preview; confirm again if it still looks right.`);
      } else {
        setError(errorText(e));
      }
    } finally {
      setBusy(false);
    }
  }

  const toggle = (key) => setForced((prev) => {
    const next = new Set(prev);
    if (next.has(key)) next.delete(key); else next.add(key);
    return next;
  });

  const shown = result || preview;
  const files = shown ? shown.files : [];
  const conflicts = files.filter((f) => f.status === 'modified').length;
  const text = shown ? shown.message : message && (message.content || message.text) || '';
  return html`
    <div class="f-overlay" onClick=${(ev) => { if (ev.target === ev.currentTarget && !busy) onClose(); }}>
      <div class="f-sheet" role="dialog" aria-modal="true" aria-labelledby="f-rewind-title"
           data-testid="rewind-preview" data-state=${result ? 'rewound' : preview ? 'preview' : error ? 'error' : 'loading'}>
        <h2 class="f-title" id="f-rewind-title">
          ${result ? 'Rewound' : error && !preview ? 'Unable to rewind' : 'Rewind to before this message?'}</h2>
        ${text && html`<blockquote class="f-quote">${text.length > 400 ? text.slice(0, 400) + '…' : text}</blockquote>`}
        ${busy && !preview && !result && html`<p class="f-muted">Checking what would change…</p>`}
        ${preview && !result && html`<p class="f-small">
          This message and everything after it leave the conversation; its text returns to the composer.
          ${files.length ? ' Files the agent changed since are restored: unchanged ones directly, ones you edited without conflict by a merge; conflicting ones are kept unless you force them. Commands run cannot be undone.' : ' No files were changed since.'}</p>`}
        ${result && html`<p class="f-ok" role="status">Done. The message text is in the composer${files.length ? '; what happened to each file:' : '.'}</p>`}
        ${notice && html`<p class="f-warn" role="status">${notice}</p>`}
        ${error && html`<p class="f-error" role="alert">${error}</p>`}
        ${files.length > 0 && html`
          <ul class="f-files f-files-scroll">
            ${files.map((f) => html`<${RewindFile} key=${f.key} file=${f} forced=${forced} onForce=${toggle} busy=${busy} root=${root} />`)}
          </ul>`}
        ${!result && conflicts > 0 && forced.size > 0 && html`<p class="f-error f-small">
          Force restore overwrites every change made after the agent's in the ticked files.</p>`}
        <div class="f-actions">
          ${result
            ? html`<button type="button" class="f-btn f-btn-primary" onClick=${onClose}>Close</button>`
            : html`
              <button type="button" class="f-btn" disabled=${busy && !!preview} onClick=${onClose}>
                ${preview ? 'Cancel' : 'Close'}</button>
              ${preview && html`<button type="button" class="f-btn f-btn-danger" data-testid="rewind-confirm"
                      disabled=${busy} onClick=${confirm}>${busy ? 'Rewinding…' : 'Rewind'}</button>`}`}
        </div>
      </div>
    </div>`;
}

/** Open the rewind dialog for `message` (a user message with its seq); returns unmount. */
export function mountRewind(el, ctx, message) {
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    render(null, el);
    // Let the core drop its container if it made one for us.
    el.dispatchEvent(new CustomEvent('foya:close', { bubbles: true }));
  };
  render(html`<${RewindDialog} ctx=${ctx} message=${message} onClose=${close} />`, el);
  return () => { closed = true; render(null, el); };
}

// How many of the latest user messages the picker lists (history comes whole from the API).
const PICK_LIMIT = 50;

function RewindPicker({ ctx }) {
  const sid = ctx.sessionId;
  const [messages, setMessages] = useState(null);
  const [error, setError] = useState('');
  const [open, setOpen] = useState(null);

  async function load() {
    try {
      const history = await ctx.api.get(`/sessions/${encodeURIComponent(sid)}/history`);
      const users = (Array.isArray(history) ? history : history.messages || [])
        .filter((m) => m.role === 'user' && (m.event_seq || m.seq));
      setMessages(users.slice(-PICK_LIMIT).reverse());
    } catch (e) {
      setError(errorText(e));
    }
  }
  useEffect(() => { load(); }, [sid]);

  return html`
    <section class="f-view">
      <header class="f-view-head">
        <a class="f-btn f-btn-ghost" href=${`#/s/${encodeURIComponent(sid)}`}>← Chat</a>
        <h2 class="f-title">Rewind</h2>
      </header>
      ${error && html`<p class="f-error" role="alert">${error}</p>`}
      ${messages && !messages.length && html`<p class="f-empty">No user messages to rewind to.</p>`}
      ${messages && html`<ul class="f-list">
        ${messages.map((m) => html`<li class="f-list-item" key=${m.event_seq || m.seq}>
          <span class="f-grow f-clip">${String(m.content || '').slice(0, 200)}</span>
          <button type="button" class="f-btn" data-testid="rewind-pick" onClick=${() => setOpen(m)}>Rewind</button>
        </li>`)}
      </ul>`}
      ${open && html`<${RewindDialog} ctx=${ctx} message=${open} onClose=${() => { setOpen(null); load(); }} />`}
    </section>`;
}

/** Contract entry point: a picker of the session's user messages, each opening the dialog. */
export function mount(el, ctx) {
  render(html`<${RewindPicker} ctx=${ctx} />`, el);
  return () => render(null, el);
}
