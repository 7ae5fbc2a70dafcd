// The pieces of a conversation: messages, tool cards with their diffs, the reply being
// generated, approvals, questions and the queue. Stateless about the session: each takes
// what it shows and callbacks; the chat view (chat.js) wires them to the follower.

import { html, Component, useState, useRef, useEffect, useLayoutEffect, useReducer } from '../../vendor/htm/standalone.module.js';
import { toHtml, LivePainter } from '../markdown.js';
import { icon } from '../icons.js';

const OUTPUT_SHOWN = 20000; // characters of a tool's output shown before "Show all"
const DIFF_LINES = 1500;

export function Markdown({ text, cls }) {
  return html`<div class=${`md ${cls || ''}`} data-testid="message-text" dangerouslySetInnerHTML=${{ __html: toHtml(text) }}></div>`;
}

function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (p && typeof p.text === 'string' ? p.text : '')).join('');
  return content == null ? '' : JSON.stringify(content);
}

// --- tool cards --------------------------------------------------------------------------

function parseArgs(input) {
  if (input && typeof input === 'object') return input;
  try {
    return JSON.parse(input || '{}');
  } catch {
    return null;
  }
}

// One line naming what the call does: the command, the path, the query, else the first text.
function gist(args) {
  if (!args || typeof args !== 'object') return '';
  for (const key of ['command', 'path', 'file_path', 'url', 'query', 'pattern', 'task']) {
    if (typeof args[key] === 'string') return args[key];
  }
  const first = Object.values(args).find((v) => typeof v === 'string');
  return first || '';
}

export function Diff({ text }) {
  const lines = String(text || '').split('\n');
  const cut = lines.length > DIFF_LINES;
  return html`<pre class="diff" data-testid="tool-diff">${(cut ? lines.slice(0, DIFF_LINES) : lines).map((l) => {
    const c = l.startsWith('+++') || l.startsWith('---') ? 'd-file' : l[0] === '+' ? 'd-add' : l[0] === '-' ? 'd-del' : l[0] === '@' ? 'd-hunk' : '';
    return html`<span class=${c}>${l}\n</span>`;
  })}${cut ? `… ${lines.length - DIFF_LINES} more lines` : ''}</pre>`;
}

function Output({ text }) {
  const [all, setAll] = useState(false);
  const long = text.length > OUTPUT_SHOWN;
  return html`<div class="tool-output">
    <pre class="pre" data-testid="tool-output">${long && !all ? `${text.slice(0, OUTPUT_SHOWN)}…` : text}</pre>
    ${long && !all && html`<button class="btn btn-small" type="button" onClick=${() => setAll(true)}>Show all (${text.length} characters)</button>`}
  </div>`;
}

const STATUS = { queued: 'queued', running: 'running…', done: 'done', error: 'error' };

export function ToolCard({ tool, onCancel }) {
  const args = parseArgs(tool.input);
  const line = gist(args);
  const pretty = args ? JSON.stringify(args, null, 2) : String(tool.input || '');
  const status = tool.status || 'queued';
  return html`
    <div class=${`tool tool-${status}`} data-testid="tool-call" data-tool-call-id=${tool.id} data-status=${status}>
      <div class="tool-head">
        <span class="tool-name">${tool.name || 'tool'}</span>
        <span class="tool-gist" title=${line}>${line}</span>
        <span class=${`chip chip-${status}`}>${STATUS[status] || status}</span>
        ${status === 'running' && onCancel && html`<button class="btn btn-small" type="button" data-testid="tool-cancel"
          onClick=${() => onCancel(tool.id)}>Stop</button>`}
      </div>
      <details class="tool-body">
        <summary>Arguments${tool.output != null ? ' and output' : ''}</summary>
        <pre class="pre" data-testid="tool-args">${pretty}</pre>
        ${tool.output != null && html`<${Output} text=${String(tool.output)} />`}
        ${tool.attachments && tool.attachments.length ? html`<p class="muted">Attachments: ${tool.attachments.map((a) => a.name).join(', ')}</p>` : ''}
      </details>
      ${tool.diff && html`<details class="tool-diff" open><summary>File changes</summary><${Diff} text=${tool.diff} /></details>`}
    </div>`;
}

// --- messages ----------------------------------------------------------------------------

function Reasoning({ text, live }) {
  return html`<details class="reasoning" data-testid="reasoning">
    <summary>${live ? 'Thinking…' : 'Thoughts'}</summary>
    <div class="reasoning-text">${text}</div>
  </details>`;
}

function TurnLine({ m }) {
  if (!m.turn_status || m.turn_status === 'completed') return null;
  const why = m.turn_reason ? ` (${m.turn_reason.replace(/_/g, ' ')})` : '';
  return html`<p class=${`turn-line turn-${m.turn_status}`}>${m.turn_status === 'cancelled' ? 'Stopped' : 'Failed'}${why}</p>`;
}

/** One stored message; re-renders only when its object (or the busy flag) changes. */
export class MessageView extends Component {
  shouldComponentUpdate(next) {
    return next.m !== this.props.m || next.busy !== this.props.busy;
  }

  render({ m, tools, busy, onRewind, onCancelTool }) {
    const seq = m.event_seq || undefined;
    if (m.role === 'user') {
      return html`<article class="msg msg-user" data-testid="message" data-role="user" data-seq=${seq}>
        <div class="bubble">
          <div class="plain" data-testid="message-text">${textOf(m.content)}</div>
          ${m.attachments && m.attachments.length ? html`<p class="muted small">${icon('clip')} ${m.attachments.map((a) => a.name).join(', ')}</p>` : ''}
        </div>
        ${seq && onRewind && html`<button class="btn btn-small btn-ghost" type="button" data-testid="rewind" disabled=${busy}
          title="Go back to before this message" onClick=${() => onRewind(m)}>Rewind</button>`}
      </article>`;
    }
    if (m.role === 'assistant') {
      const text = textOf(m.content);
      return html`<article class="msg msg-assistant" data-testid="message" data-role="assistant" data-seq=${seq}>
        ${m.reasoning && html`<${Reasoning} text=${m.reasoning} />`}
        ${text && html`<${Markdown} text=${text} />`}
        ${(m.tool_calls || []).map((c) => html`<${ToolCard} key=${c.id} tool=${tools.get(c.id) || c} onCancel=${onCancelTool} />`)}
        <${TurnLine} m=${m} />
      </article>`;
    }
    if (m.role === 'tool') {
      // Shown alone only when its call is not on screen (older than the loaded page).
      const tool = tools.get(m.tool_call_id) || { id: m.tool_call_id, name: m.name, output: textOf(m.content), diff: m.diff, status: m.is_error ? 'error' : 'done' };
      return html`<article class="msg msg-tool" data-testid="message" data-role="tool" data-seq=${seq}>
        <${ToolCard} tool=${tool} />
      </article>`;
    }
    return html`<article class="msg msg-system" data-testid="message" data-role=${m.role || 'system'} data-seq=${seq}>
      <${Markdown} text=${textOf(m.content)} cls="small" />
    </article>`;
  }
}

/**
 * The reply being generated. Its text is painted straight into the DOM (markdown.js
 * LivePainter) on each frame the follower reports; Preact renders only its frame, so a long
 * stream never re-renders anything else.
 */
export function LiveReply({ follower, onGrow, onCancelTool }) {
  const [, force] = useReducer((x) => x + 1, 0);
  const textEl = useRef(null);
  const reasonEl = useRef(null);
  const shape = useRef('');
  const painter = useRef(null);

  // A change of the frame (text appeared, a tool card came or changed) re-renders; the text
  // itself is painted by paintText, from the layout effect or straight from the follower.
  function onLive() {
    const live = follower.live;
    const key = `${!!live.text}|${!!live.reasoning}|${live.toolIds.join(',')}`;
    if (key !== shape.current || live.toolIds.length) {
      shape.current = key;
      force();
      return;
    }
    paintText();
  }

  function paintText() {
    const live = follower.live;
    const r = reasonEl.current;
    if (r) {
      const node = r.firstChild; // appended to, so a long thought is not laid out again
      if (node && node.nodeType === 3 && live.reasoning.startsWith(node.data)) node.appendData(live.reasoning.slice(node.data.length));
      else r.textContent = live.reasoning;
    }
    const el = textEl.current;
    if (el) {
      if (!painter.current || painter.current.el !== el) painter.current = new LivePainter(el);
      painter.current.paint(live.text);
    }
    if (onGrow) onGrow();
  }

  useEffect(() => {
    const off = follower.onLive(onLive);
    return off;
  }, [follower]);
  useLayoutEffect(paintText);

  const live = follower.live;
  if (!live.text && !live.reasoning && !live.toolIds.length) return null;
  return html`<article class="msg msg-assistant is-live" data-testid="message" data-role="assistant">
    ${live.reasoning && html`<details class="reasoning" data-testid="reasoning"><summary>Thinking…</summary>
      <div class="reasoning-text" ref=${reasonEl}></div></details>`}
    ${live.text && html`<div class="md" data-testid="message-text" ref=${textEl}></div>`}
    ${live.toolIds.map((id) => html`<${ToolCard} key=${id} tool=${follower.tools.get(id) || { id }} onCancel=${onCancelTool} />`)}
  </article>`;
}

// --- what waits for the user -------------------------------------------------------------

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return String(text || '');
  }
}

export function Approval({ req, onDecide }) {
  const [busy, setBusy] = useState('');
  const what = gist(parseArgs(req.detail)); // the command or path being approved, up front
  const decide = async (decision) => {
    setBusy(decision);
    try {
      await onDecide(req.id, decision);
    } finally {
      setBusy('');
    }
  };
  return html`<div class="card approval" data-testid="approval" data-approval-id=${req.id} role="group" aria-label="Approval needed">
    <p class="card-title"><b>${req.tool_name || 'A tool'}</b> wants to <b>${req.action || 'act'}</b>${req.scope && req.scope !== 'workspace' ? ` (${req.scope})` : ''}</p>
    ${what && html`<pre class="pre approval-what">${what}</pre>`}
    ${req.resource && req.resource !== what && html`<p class="mono clip" title=${req.resource}>${req.resource}</p>`}
    ${req.detail && html`<details><summary>Details</summary><pre class="pre">${pretty(req.detail)}</pre></details>`}
    <div class="row wrap">
      <button class="btn btn-primary" type="button" data-testid="approve" disabled=${!!busy} onClick=${() => decide('approved')}>Allow</button>
      <button class="btn" type="button" data-testid="approve-session" disabled=${!!busy} onClick=${() => decide('approved_for_session')}>Allow for this chat</button>
      <button class="btn btn-danger" type="button" data-testid="deny" disabled=${!!busy} onClick=${() => decide('denied')}>Deny</button>
    </div>
  </div>`;
}

export function Question({ batch, onAnswer, onSkip }) {
  const questions = batch.questions || [];
  const [values, setValues] = useState({});
  const [busy, setBusy] = useState(false);
  const set = (id, v) => setValues((old) => ({ ...old, [id]: v }));
  const ready = questions.every((q) => String(values[q.id] || '').trim());
  async function submit(e) {
    e.preventDefault();
    if (!ready) return;
    setBusy(true);
    try {
      await onAnswer(batch.id, questions.map((q) => ({ question_id: q.id, value: String(values[q.id]).trim() })));
    } finally {
      setBusy(false);
    }
  }
  return html`<form class="card question" data-testid="question" data-question-id=${batch.id} onSubmit=${submit}>
    ${questions.map((q) => {
      const options = q.options || [];
      const custom = q.allow_custom || !options.length;
      const picked = options.some((o) => o.label === values[q.id]);
      return html`<fieldset class="q" key=${q.id}>
        <legend class="card-title">${q.question}</legend>
        ${q.description && html`<p class="muted small">${q.description}</p>`}
        ${options.map((o) => html`<label class="option">
          <input type="radio" name=${`${batch.id}-${q.id}`} value=${o.label} checked=${values[q.id] === o.label}
            data-testid="question-option" onChange=${() => set(q.id, o.label)} />
          <span><b>${o.label}</b>${o.recommended ? ' (recommended)' : ''}${o.description ? html`<span class="muted small"> — ${o.description}</span>` : ''}</span>
        </label>`)}
        ${custom && html`<input class="input" data-testid="question-custom" placeholder=${options.length ? 'Or your own answer' : 'Your answer'}
          value=${picked ? '' : values[q.id] || ''} onInput=${(e) => set(q.id, e.currentTarget.value)} />`}
      </fieldset>`;
    })}
    <div class="row wrap">
      <button class="btn btn-primary" type="submit" data-testid="question-answer" disabled=${busy || !ready}>Answer</button>
      <button class="btn" type="button" data-testid="question-skip" disabled=${busy} onClick=${() => onSkip(batch.id)}>Skip</button>
    </div>
  </form>`;
}

// --- the queue ---------------------------------------------------------------------------

function QueueItem({ item, index, count, act }) {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(item.text);
  const save = async (e) => {
    e.preventDefault();
    if (text.trim() && text !== item.text) await act(() => act.edit(item.id, { message: text }));
    setEditing(false);
  };
  return html`<li class="queue-item" data-testid="queue-item" data-queue-id=${item.id}>
    ${editing
      ? html`<form class="queue-edit" onSubmit=${save}>
          <textarea class="input" rows="3" data-testid="queue-edit-input" value=${text} onInput=${(e) => setText(e.currentTarget.value)}></textarea>
          <div class="row"><button class="btn btn-primary" type="submit" data-testid="queue-save">Save</button>
          <button class="btn" type="button" onClick=${() => { setText(item.text); setEditing(false); }}>Cancel</button></div>
        </form>`
      : html`<p class="queue-text">${item.text}</p>`}
    ${!editing && html`<div class="row queue-actions">
      <button class="icon-btn" type="button" data-testid="queue-up" aria-label="Move up" disabled=${index === 0}
        onClick=${() => act(() => act.edit(item.id, { position: index - 1 }))}>↑</button>
      <button class="icon-btn" type="button" data-testid="queue-down" aria-label="Move down" disabled=${index === count - 1}
        onClick=${() => act(() => act.edit(item.id, { position: index + 1 }))}>↓</button>
      <button class="icon-btn" type="button" data-testid="queue-edit" aria-label="Edit" onClick=${() => { setText(item.text); setEditing(true); }}>✎</button>
      <button class="icon-btn" type="button" data-testid="queue-delete" aria-label="Delete" onClick=${() => act(() => act.remove(item.id))}>${icon('trash')}</button>
      <button class="btn btn-small" type="button" data-testid="queue-dispatch" onClick=${() => act(() => act.dispatch(item.id))}>Send now</button>
    </div>`}
  </li>`;
}

export function Queue({ items, follower, toast }) {
  if (!items.length) return null;
  const act = async (fn) => {
    try {
      await fn();
    } catch (e) {
      toast(e.message || String(e));
    }
  };
  act.edit = (id, change) => follower.editQueued(id, change);
  act.remove = (id) => follower.deleteQueued(id);
  act.dispatch = (id) => follower.dispatchQueued(id);
  const sorted = [...items].sort((a, b) => a.position - b.position);
  return html`<details class="queue" data-testid="queue" open>
    <summary>Queued (${items.length})</summary>
    <ol class="queue-items">${sorted.map((it, i) => html`<${QueueItem} key=${it.id} item=${it} index=${i} count=${sorted.length} act=${act} />`)}</ol>
  </details>`;
}
