// A chat: the conversation (opening at its end, paging backwards), the reply being generated,
// what waits for the user (approvals, questions), the queue, and the composer.
//
// The follower (js/stream.js) owns the session's state and its event stream; this view renders
// it. Routes, through the follower: GET …/history, …/queue, …/events; POST …/turns, …/cancel,
// …/approvals/{id}, …/questions/{id}/answer|cancel, …/tools/{id}/cancel; PATCH/DELETE
// …/queue/{id}, POST …/queue/{id}/dispatch. Feature views are loaded when opened: the
// session menu (actions.js), rewind (rewind.js `mountRewind`), review and terminal by route.

import { html, useState, useEffect, useLayoutEffect, useRef, useCallback } from '../../vendor/htm/standalone.module.js';
import { MessageView, LiveReply, Approval, Question, Queue } from './parts.js';
import { titleOf } from './sessions.js';
import * as notifier from '../notify.js';
import { icon } from '../icons.js';

const SHOWN_STEP = 100; // messages rendered at first, and added per `older`
const STICK = 80; // px from the bottom that still counts as "at the end"
const drafts = new Map(); // session id → unsent composer text, across navigation

const enc = encodeURIComponent;

/**
 * Mount a feature module's export (default `mount(el, ctx, ...args)` → unmount) into a div,
 * loading the module on first use; a module not there yet shows a note instead of breaking.
 */
export function FeatureMount({ name, ctx, exportName = 'mount', args = [], cls = '', onClose }) {
  const host = useRef(null);
  const [failed, setFailed] = useState('');
  useEffect(() => {
    let unmount = null;
    let live = true;
    setFailed('');
    import(`./${name}.js`).then((mod) => {
      if (!live) return;
      const fn = mod[exportName];
      if (typeof fn !== 'function') throw new Error(`${name}.js has no ${exportName}()`);
      unmount = fn(host.current, ctx, ...args) || null;
    }).catch((e) => {
      console.warn(`feature ${name} unavailable`, e);
      if (live) setFailed(`This view is not available yet (${name}).`);
    });
    return () => {
      live = false;
      if (typeof unmount === 'function') unmount();
    };
  }, [name, ctx.sessionId, exportName, ...args]);
  return html`<div class=${`feature ${cls}`}>
    ${failed && html`<p class="notice">${failed} ${onClose
      ? html`<button class="btn btn-small" type="button" onClick=${onClose}>Close</button>`
      : html`<a href=${ctx.sessionId ? `#/s/${enc(ctx.sessionId)}` : '#/'}>Back</a>`}</p>`}
    <div ref=${host} class="feature-host"></div>
  </div>`;
}

// rewind.js's dialog signals its end with a bubbling `foya:close` event on its container.
function RewindHost({ ctx, message, onClose }) {
  const host = useRef(null);
  useEffect(() => {
    const el = host.current;
    el.addEventListener('foya:close', onClose);
    return () => el.removeEventListener('foya:close', onClose);
  }, [onClose]);
  return html`<div class="overlay-host" ref=${host}>
    <${FeatureMount} name="rewind" exportName="mountRewind" ctx=${ctx} args=${[message]} onClose=${onClose} />
  </div>`;
}

function Header({ follower, ctx, menuOpen, setMenuOpen }) {
  const s = follower.session || {};
  const [perm, setPerm] = useState(notifier.permission());
  const sid = enc(follower.id);
  return html`<header class="bar chat-head">
    <a class="icon-btn back" href="#/" aria-label="Back to chats">←</a>
    <div class="chat-title">
      <h1 class="bar-title clip">${titleOf(s)}</h1>
      <span class="muted small clip">${s.model || ''}${s.approval_mode ? ` · ${s.approval_mode.replace('_', ' ')}` : ''}</span>
    </div>
    ${perm === 'default' && html`<button class="icon-btn" type="button" data-testid="notify-enable" aria-label="Notify me"
      title="Notify me when the agent needs me" onClick=${async () => setPerm(await notifier.ask())}>${icon('bell')}</button>`}
    <a class="btn btn-small btn-ghost" href=${`#/s/${sid}/review`} data-testid="open-review">Review</a>
    <a class="btn btn-small btn-ghost hide-narrow" href=${`#/s/${sid}/terminal`} data-testid="open-terminal">Terminal</a>
    <button class="icon-btn" type="button" data-testid="session-menu-open" aria-expanded=${menuOpen ? 'true' : 'false'}
      aria-label="More" onClick=${() => setMenuOpen(!menuOpen)}>⋯</button>
    ${menuOpen && html`<div class="menu-pop" onClick=${(e) => e.target.closest('a') && setMenuOpen(false)}>
      <${FeatureMount} name="actions" ctx=${ctx} />
    </div>`}
  </header>`;
}

function Composer({ follower, running, toast }) {
  const [text, setText] = useState(drafts.get(follower.id) || '');
  const [sending, setSending] = useState(false);
  const input = useRef(null);
  useEffect(() => {
    setText(drafts.get(follower.id) || '');
  }, [follower]);
  const change = (v) => {
    setText(v);
    drafts.set(follower.id, v);
  };
  async function send(e) {
    if (e) e.preventDefault();
    const message = text.trim();
    if (!message || sending) return;
    setSending(true);
    try {
      await follower.send(message); // queued by the kernel when a turn is running
      // Cleared only if unchanged: what was typed while it was being sent stays.
      setText((now) => {
        const next = now === text ? '' : now;
        drafts.set(follower.id, next);
        return next;
      });
    } catch (err) {
      toast(err.message || String(err));
    } finally {
      setSending(false);
      if (input.current) input.current.focus();
    }
  }
  // Enter sends on a keyboard-and-mouse device; on a touch keyboard Enter is a new line.
  const fine = window.matchMedia && window.matchMedia('(pointer: fine)').matches;
  const key = (e) => {
    if (e.key !== 'Enter' || e.isComposing) return;
    if (e.ctrlKey || e.metaKey || (fine && !e.shiftKey)) send(e);
  };
  return html`<form class="composer" onSubmit=${send}>
    <textarea ref=${input} class="input composer-input" data-testid="composer-input" rows="1"
      placeholder=${running ? 'Add to the queue…' : 'Message'} aria-label="Message"
      value=${text} onInput=${(e) => change(e.currentTarget.value)} onKeyDown=${key}></textarea>
    ${running && html`<button class="btn btn-danger" type="button" data-testid="cancel-turn"
      onClick=${() => follower.cancel().catch((err) => toast(err.message))}>Stop</button>`}
    <button class="btn btn-primary" type="submit" data-testid="composer-send" disabled=${sending || !text.trim()}>
      ${running ? 'Queue' : 'Send'}
    </button>
  </form>`;
}

export function Chat({ follower, ctx, toast }) {
  const [, setRev] = useState(follower.rev);
  const [shown, setShown] = useState(SHOWN_STEP);
  const [menuOpen, setMenuOpen] = useState(false);
  const [rewinding, setRewinding] = useState(null);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const scroller = useRef(null);
  const stuck = useRef(true); // following the end
  const anchor = useRef(null); // distance from the bottom to keep while older messages arrive
  const opened = useRef(false);

  useEffect(() => {
    setShown(SHOWN_STEP);
    setMenuOpen(false);
    setRewinding(null);
    stuck.current = true;
    opened.current = false;
    setRev(follower.rev);
    return follower.onChange(setRev);
  }, [follower]);

  const toEnd = useCallback(() => {
    const el = scroller.current;
    if (el && stuck.current) el.scrollTop = el.scrollHeight;
  }, []);

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    if (anchor.current != null) {
      el.scrollTop = el.scrollHeight - anchor.current;
      anchor.current = null;
    } else if (follower.loaded && !opened.current) {
      opened.current = true;
      el.scrollTop = el.scrollHeight; // a chat opens at its end
    } else toEnd();
  });

  const onScroll = () => {
    const el = scroller.current;
    stuck.current = el.scrollHeight - el.scrollTop - el.clientHeight < STICK;
  };

  async function older() {
    const el = scroller.current;
    anchor.current = el ? el.scrollHeight - el.scrollTop : null;
    if (shown < follower.messages.length) {
      setShown(shown + SHOWN_STEP);
      return;
    }
    setLoadingOlder(true);
    try {
      const n = await follower.older();
      anchor.current = el ? el.scrollHeight - el.scrollTop : null;
      setShown(shown + Math.max(n, 0));
    } catch (e) {
      anchor.current = null;
      toast(e.message || String(e));
    } finally {
      setLoadingOlder(false);
    }
  }

  const cancelTool = (id) => follower.cancelTool(id).catch((e) => toast(e.message));
  const decide = (id, d) => follower.decide(id, d).catch((e) => toast(e.message));
  const answer = (id, a) => follower.answer(id, a).catch((e) => toast(e.message));
  const skip = (id) => follower.skipQuestions(id).catch((e) => toast(e.message));

  const all = follower.messages;
  const start = Math.max(0, all.length - shown);
  const visible = all.slice(start).filter((m) => !(m.role === 'tool' && follower.owner.has(m.tool_call_id)));
  const hasOlder = start > 0 || follower.more;
  const running = follower.running || follower.compacting;
  const busy = running || follower.queue.length > 0;
  const live = follower.live;
  const idleWait = follower.running && !live.text && !live.reasoning && !live.toolIds.length
    && !follower.approvals.size && !follower.questions.size;

  if (follower.gone) {
    return html`<section class="chat"><p class="notice pad">This chat was deleted. <a href="#/">Back to chats</a></p></section>`;
  }
  return html`<section class="chat" aria-busy=${running ? 'true' : 'false'}>
    <${Header} follower=${follower} ctx=${ctx} menuOpen=${menuOpen} setMenuOpen=${setMenuOpen} />
    <div class="chat-scroll" ref=${scroller} onScroll=${onScroll}>
      <div class="chat-inner">
        ${hasOlder && html`<button class="btn btn-ghost btn-wide" type="button" data-testid="older" disabled=${loadingOlder}
          onClick=${older}>${loadingOlder ? 'Loading…' : 'Older messages'}</button>`}
        ${!follower.loaded && html`<p class="muted pad">Loading…</p>`}
        ${follower.error && html`<p class="error pad" role="alert">${follower.error}</p>`}
        ${follower.loaded && !all.length && !live.text && html`<p class="muted pad center">Say something to start.</p>`}
        ${visible.map((m, i) => html`<${MessageView} key=${m.event_seq || `i${start + i}`} m=${m} tools=${follower.tools}
          busy=${busy} onRewind=${setRewinding} onCancelTool=${cancelTool} />`)}
        <${LiveReply} follower=${follower} onGrow=${toEnd} onCancelTool=${cancelTool} />
        ${follower.notes.map((n, i) => html`<p key=${i} class=${`note note-${n.kind}`} data-testid="note" role=${n.kind === 'error' ? 'alert' : undefined}>${n.text}</p>`)}
        ${idleWait && html`<p class="typing muted" data-testid="working">Working…</p>`}
        ${follower.compacting && html`<p class="typing muted">Compacting the conversation…</p>`}
        ${[...follower.approvals.values()].map((r) => html`<${Approval} key=${r.id} req=${r} onDecide=${decide} />`)}
        ${[...follower.questions.values()].map((b) => html`<${Question} key=${b.id} batch=${b} onAnswer=${answer} onSkip=${skip} />`)}
      </div>
    </div>
    <div class="chat-foot">
      <${Queue} items=${follower.queue} follower=${follower} toast=${toast} />
      <${Composer} follower=${follower} running=${running} toast=${toast} />
    </div>
    ${rewinding && html`<${RewindHost} ctx=${ctx} message=${rewinding} onClose=${() => setRewinding(null)} />`}
  </section>`;
}
