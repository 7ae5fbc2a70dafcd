// The session menu: fork, compaction, this session's last request usage and a link to usage.
//
// Routes: POST /sessions/{id}/fork {} → the new Session (409 session_busy while a turn runs or
// the queue holds input); POST /sessions/{id}/compact → {through_seq, estimated_tokens_before,
// estimated_tokens_after, segment_count?, …} (409 session_busy / nothing_to_compact, 501
// compaction_unavailable, 502 compaction_failed); GET /sessions/{id}/usage → the last model
// request's {model, input_tokens, output_tokens, total_tokens, cached_tokens}.
// Events (if the core hands a session subscription): compaction_started/completed/failed — a
// compaction started elsewhere (or by the budget) shows here too — and usage_updated.

import { html, render, useState, useEffect } from '../../vendor/htm/standalone.module.js';
import { errorText, payloadOf } from './review.js';

const fmt = new Intl.NumberFormat(undefined);

// Short, actionable words for the errors a user can do something about.
const HINT = {
  session_busy: 'The session is busy: wait for the turn (and the queue) to finish, or stop it.',
  nothing_to_compact: 'Nothing to compact yet: the conversation is still short.',
  compaction_unavailable: 'This model connection cannot compact.',
  compaction_failed: 'The model failed to write the summary; try again later.',
};

function hint(e) {
  return (e && HINT[e.code]) || errorText(e);
}

function Menu({ ctx }) {
  const sid = ctx.sessionId;
  const base = `/sessions/${encodeURIComponent(sid)}`;
  const [forking, setForking] = useState(false);
  const [forkError, setForkError] = useState('');
  // compaction: {state: idle|running|done|failed, result?, error?}
  const [compaction, setCompaction] = useState({ state: 'idle' });
  const [usage, setUsage] = useState(null);

  useEffect(() => {
    let live = true;
    ctx.api.get(`${base}/usage`).then((u) => { if (live) setUsage(u); }, () => {});
    if (!ctx.events) return () => { live = false; };
    const offs = [
      ctx.events.on('usage_updated', (d) => setUsage(payloadOf(d))),
      ctx.events.on('compaction_started', () => setCompaction((c) => (c.state === 'running' ? c : { state: 'running' }))),
      // Our own POST's answer carries the numbers; the event only matters for one started
      // elsewhere, so it does not overwrite a result we already have.
      ctx.events.on('compaction_completed', (d) => setCompaction((c) => (c.result ? c : { state: 'done', result: checkpointNumbers(payloadOf(d)) }))),
      ctx.events.on('compaction_failed', (d) => setCompaction((c) => (c.result ? c : { state: 'failed', error: failText(payloadOf(d)) }))),
    ];
    return () => { live = false; offs.forEach((off) => off && off()); };
  }, [base]);

  async function fork() {
    setForking(true);
    setForkError('');
    try {
      const s = await ctx.api.post(`${base}/fork`, {});
      ctx.toast && ctx.toast(`Forked: ${s.title || 'New chat copy'}`);
      ctx.navigate(`#/s/${encodeURIComponent(s.id)}`);
    } catch (e) {
      setForkError(hint(e));
    } finally {
      setForking(false);
    }
  }

  async function compact() {
    setCompaction({ state: 'running' });
    try {
      const r = await ctx.api.post(`${base}/compact`, {});
      setCompaction({ state: 'done', result: r });
      ctx.toast && ctx.toast('Conversation compacted');
    } catch (e) {
      setCompaction({ state: 'failed', error: hint(e) });
    }
  }

  const running = compaction.state === 'running';
  return html`
    <div class="f-menu" data-testid="session-menu" role="menu">
      <button type="button" class="f-menu-item" role="menuitem" data-testid="fork"
              disabled=${forking} onClick=${fork}>
        <span class="f-menu-label">${forking ? 'Forking…' : 'Fork'}</span>
        <span class="f-menu-desc">A new chat with a copy of this conversation</span>
      </button>
      ${forkError && html`<p class="f-error f-small" role="alert">${forkError}</p>`}

      <button type="button" class="f-menu-item" role="menuitem" data-testid="compact"
              disabled=${running} aria-busy=${running ? 'true' : 'false'} onClick=${compact}>
        <span class="f-menu-label">${running ? html`<span class="f-spinner" aria-hidden="true"></span> Compacting…` : 'Compact'}</span>
        <span class="f-menu-desc">Summarize earlier turns to free context</span>
      </button>
      ${running && html`<progress class="f-progress" aria-label="Compacting"></progress>`}
      ${compaction.state === 'done' && html`<${CompactResult} r=${compaction.result} />`}
      ${compaction.state === 'failed' && html`<p class="f-error f-small" role="alert" data-testid="compact-error">${compaction.error}</p>`}

      <a class="f-menu-item" role="menuitem" href="#/usage">
        <span class="f-menu-label">Usage</span>
        <span class="f-menu-desc">${usage && usage.total_tokens
          ? `Last request: ${fmt.format(usage.total_tokens)} tokens${usage.model ? ' · ' + usage.model : ''}`
          : 'Tokens by day and model'}</span>
      </a>
      <a class="f-menu-item" role="menuitem" href=${`#/s/${encodeURIComponent(sid)}/review`}>
        <span class="f-menu-label">Review files</span>
        <span class="f-menu-desc">Keep or undo the agent's file changes</span>
      </a>
      <a class="f-menu-item" role="menuitem" href=${`#/s/${encodeURIComponent(sid)}/terminal`}>
        <span class="f-menu-label">Terminal</span>
        <span class="f-menu-desc">A shell in the session's directory</span>
      </a>
    </div>`;
}

// A `compaction_completed` payload is the checkpoint; it may carry the same estimates.
function checkpointNumbers(p) {
  return p && typeof p === 'object' ? p : {};
}

function failText(p) {
  if (!p) return 'Compaction failed';
  if (typeof p === 'string') return p;
  return p.message || p.error || p.reason || 'Compaction failed';
}

function CompactResult({ r }) {
  const before = r && r.estimated_tokens_before;
  const after = r && r.estimated_tokens_after;
  return html`
    <p class="f-ok f-small" role="status" data-testid="compact-result">
      Compacted${before != null && after != null
        ? html`: about ${fmt.format(before)} → ${fmt.format(after)} tokens`
        : ''}${r && r.segment_count ? ` (${r.segment_count} segment${r.segment_count > 1 ? 's' : ''})` : ''}.
    </p>`;
}

/** Contract entry point: the session menu's content for `ctx.sessionId`. */
export function mount(el, ctx) {
  render(html`<${Menu} ctx=${ctx} />`, el);
  return () => render(null, el);
}
