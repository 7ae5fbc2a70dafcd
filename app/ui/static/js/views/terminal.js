// Terminals of a session: a shell on a PTY in the kernel, shown with xterm.js.
//
// Routes: GET /sessions/{id}/terminals → [{ref, session_id, running, exit_code?, seq}] (ours);
// POST /sessions/{id}/terminals {cols, rows} → 201 {ref, session_id, running,
// exit_code?, buffer?, seq}; GET …/terminals/{ref} (the snapshot: last MiB of output in
// `buffer`, last event `seq`); POST …/{ref}/input {input} → 204; POST …/{ref}/resize {cols,
// rows} → 204; DELETE …/{ref} → 204; GET …/{ref}/events (SSE, event `terminal`, ids are the
// terminal's own seqs, data {session_id, ref, seq, data?, exited?, exit_code?, truncated?,
// missed?}; resumes after Last-Event-ID). Errors: 404 terminal_not_found, 501
// terminal_unavailable.
//
// Opening the view lists the session's terminals, whichever device started them, and attaches
// to the newest: a shell begun on the laptop goes on from the phone (a ref the kernel forgot
// meanwhile answers 404 and is dropped).
// xterm.js (~340 KB) is imported only when this view mounts.

import { html, render, useState, useEffect, useRef } from '../../vendor/htm/standalone.module.js';
import { errorText } from './review.js';

const VENDOR = new URL('../../vendor/xterm/', import.meta.url);
let loading = null;

/** xterm + fit addon, and xterm.css as a <link> (CSP allows 'self' stylesheets). Once. */
function loadXterm() {
  if (!loading) {
    if (!document.querySelector('link[data-f-xterm]')) {
      const link = document.createElement('link');
      link.rel = 'stylesheet';
      link.href = new URL('xterm.css', VENDOR).href;
      link.dataset.fXterm = '';
      document.head.appendChild(link);
    }
    loading = Promise.all([import('../../vendor/xterm/xterm.mjs'), import('../../vendor/xterm/addon-fit.mjs')])
      .then(([x, f]) => ({ Terminal: x.Terminal, FitAddon: f.FitAddon }))
      .catch((e) => { loading = null; throw e; });
  }
  return loading;
}

// xterm's DOM renderer writes its theme and cell sizes into <style> elements, which the strict
// CSP (style-src 'self', no 'unsafe-inline') refuses. While a terminal view is mounted,
// document.createElement('style') returns an <f-xterm-style> element instead: its textContent
// goes into a constructed stylesheet (CSSOM, which CSP does not restrict) adopted by the
// document while the element is connected. Nothing else in the client creates <style>.
class XtermStyle extends HTMLElement {
  constructor() { super(); this._css = ''; this._sheet = new CSSStyleSheet(); }
  get textContent() { return this._css; }
  set textContent(css) { this._css = String(css ?? ''); this._sheet.replaceSync(this._css); }
  connectedCallback() {
    if (!document.adoptedStyleSheets.includes(this._sheet)) document.adoptedStyleSheets = [...document.adoptedStyleSheets, this._sheet];
  }
  disconnectedCallback() { document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== this._sheet); }
}
if (!customElements.get('f-xterm-style')) customElements.define('f-xterm-style', XtermStyle);
// Its cells' 24-bit colours it writes with setAttribute('style', …), which the CSP refuses
// too; meanwhile that call sets `style.cssText` instead (CSSOM again: the same declarations).
let shimUsers = 0;
const setAttribute = Element.prototype.setAttribute;
function setAttributeViaCssom(name, value) {
  if (String(name).toLowerCase() === 'style' && this instanceof HTMLElement) this.style.cssText = String(value);
  else setAttribute.call(this, name, value);
}
function shimStyles(on) {
  shimUsers += on ? 1 : -1;
  if (on && shimUsers === 1) {
    const create = Document.prototype.createElement;
    document.createElement = function createElement(tag, options) {
      return String(tag).toLowerCase() === 'style' ? create.call(this, 'f-xterm-style') : create.call(this, tag, options);
    };
    Element.prototype.setAttribute = setAttributeViaCssom;
  } else if (!on && shimUsers === 0) {
    delete document.createElement; // back to Document.prototype's
    Element.prototype.setAttribute = setAttribute;
  }
}

const DARK = { background: '#0b0d10', foreground: '#d6d8dc', cursor: '#e6e6e6', selectionBackground: '#5a606b80' };
const LIGHT = { background: '#ffffff', foreground: '#24272b', cursor: '#18181b', cursorAccent: '#ffffff', selectionBackground: '#71717a40',
  black: '#18181b', red: '#b91c1c', green: '#15803d', yellow: '#a16207', blue: '#1d4ed8', magenta: '#a21caf', cyan: '#0e7490', white: '#d4d4d8' };
const darkQuery = window.matchMedia('(prefers-color-scheme: dark)');

// Keys a phone keyboard lacks.
const KEYS = [['Esc', '\x1b', 'Escape'], ['Tab', '\t', 'Tab'], ['^C', '\x03', 'Control C'], ['^D', '\x04', 'Control D'],
  ['↑', '\x1b[A', 'Up'], ['↓', '\x1b[B', 'Down'], ['←', '\x1b[D', 'Left'], ['→', '\x1b[C', 'Right']];

function TerminalView({ ctx }) {
  const sid = ctx.sessionId;
  const base = `/sessions/${encodeURIComponent(sid)}/terminals`;
  const wrap = useRef(null);
  // Everything xterm-side lives in one mutable object: it must survive re-renders untouched.
  const t = useRef({ term: null, fit: null, stream: null, ref: '', seq: 0, running: false, out: '', sending: false, size: '', refs: [] }).current;
  const [refs, setRefs] = useState([]);
  const [active, setActive] = useState('');
  const [status, setStatus] = useState({ state: 'idle' }); // idle|loading|running|exited|error
  const [busy, setBusy] = useState(false);

  const setRefList = (list) => { t.refs = list; setRefs(list); };

  async function ensureTerm() {
    if (t.term) return t.term;
    const { Terminal, FitAddon } = await loadXterm();
    const term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000, convertEol: false,
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
      theme: darkQuery.matches ? DARK : LIGHT });
    const fit = new FitAddon();
    term.loadAddon(fit);
    const host = document.createElement('div');
    host.className = 'f-term-host';
    wrap.current.appendChild(host);
    term.open(host);
    term.onData((data) => send(data));
    t.term = term;
    t.fit = fit;
    fitNow();
    return term;
  }

  function fitNow() {
    if (!t.fit || !wrap.current || !wrap.current.clientWidth) return;
    try { t.fit.fit(); } catch { /* not laid out yet */ }
  }

  // Keystrokes go out one request at a time, in order; what is typed meanwhile is batched.
  async function send(data) {
    if (!t.ref || !t.running) return;
    t.out += data;
    if (t.sending) return;
    t.sending = true;
    try {
      while (t.out) {
        const chunk = t.out;
        t.out = '';
        await ctx.api.post(`${base}/${encodeURIComponent(t.ref)}/input`, { input: chunk });
      }
    } catch (e) {
      setStatus({ state: 'error', error: errorText(e) });
    } finally {
      t.sending = false;
      t.out = '';
    }
  }

  function resizeSoon() {
    clearTimeout(t.resizeTimer);
    t.resizeTimer = setTimeout(() => {
      fitNow();
      if (!t.term || !t.ref || !t.running) return;
      const size = `${t.term.cols}x${t.term.rows}`;
      if (size === t.size) return;
      t.size = size;
      ctx.api.post(`${base}/${encodeURIComponent(t.ref)}/resize`, { cols: t.term.cols, rows: t.term.rows }).catch(() => {});
    }, 150);
  }

  function onEvent(kind, data) {
    if (kind !== 'terminal' || t.detached) return;
    const ev = typeof data === 'string' ? JSON.parse(data) : data;
    if (!ev || ev.ref !== t.ref || ev.seq <= t.seq) return; // replayed twice after a reconnect
    t.seq = ev.seq;
    if (ev.truncated) { resync(); return; } // output was lost: redraw from the snapshot
    if (ev.data) t.term.write(ev.data);
    if (ev.exited) {
      t.running = false;
      // Nothing follows an exit: stop the stream, or it would reconnect for nothing.
      if (t.stream) { t.stream.close(); t.stream = null; }
      setStatus({ state: 'exited', code: ev.exit_code });
    }
  }

  // The kernel forgot the terminal (it restarted, or another tab closed it): 404 ends the stream.
  function gone(ref) {
    if (t.ref !== ref || t.detached) return;
    t.running = false;
    setRefList(t.refs.filter((r) => r !== ref));
    setStatus({ state: 'error', error: 'This terminal is gone (the kernel restarted or it was closed).' });
  }

  async function resync() {
    try {
      const snap = await ctx.api.get(`${base}/${encodeURIComponent(t.ref)}`);
      t.term.reset();
      t.term.write(snap.buffer || '');
      t.seq = Math.max(t.seq, snap.seq);
    } catch { /* the next event still comes */ }
  }

  /** Show terminal `ref` from `snap`, then follow its stream after the snapshot's seq. */
  async function attach(ref, snap) {
    const term = await ensureTerm();
    if (t.stream) t.stream.close();
    t.detached = false;
    t.ref = ref;
    t.seq = snap.seq || 0;
    t.size = '';
    t.running = !!snap.running;
    term.reset();
    term.write(snap.buffer || '');
    setActive(ref);
    setStatus(snap.running ? { state: 'running' } : { state: 'exited', code: snap.exit_code });
    t.stream = ctx.api.stream(`${base}/${encodeURIComponent(ref)}/events`,
      { onEvent, lastEventId: t.seq ? String(t.seq) : undefined, onGone: () => gone(ref) });
    resizeSoon();
    term.focus();
  }

  async function open() {
    setBusy(true);
    setStatus({ state: 'loading' });
    try {
      const term = await ensureTerm();
      fitNow();
      const snap = await ctx.api.post(base, { cols: term.cols, rows: term.rows });
      setRefList([...t.refs.filter((r) => r !== snap.ref), snap.ref]);
      await attach(snap.ref, snap);
    } catch (e) {
      setStatus({ state: 'error', error: e && e.code === 'terminal_unavailable' ? 'Terminals are not available on this kernel.' : errorText(e) });
    } finally {
      setBusy(false);
    }
  }

  async function switchTo(ref) {
    try {
      await attach(ref, await ctx.api.get(`${base}/${encodeURIComponent(ref)}`));
    } catch (e) {
      if (e && e.status === 404) setRefList(t.refs.filter((r) => r !== ref));
      setStatus({ state: 'error', error: errorText(e) });
    }
  }

  async function close() {
    const ref = t.ref;
    if (!ref) return;
    if (t.stream) t.stream.close();
    t.stream = null;
    t.ref = '';
    t.running = false;
    setBusy(true);
    try { await ctx.api.del(`${base}/${encodeURIComponent(ref)}`); } catch (e) { if (!e || e.status !== 404) ctx.toast && ctx.toast(errorText(e)); }
    setBusy(false);
    const left = t.refs.filter((r) => r !== ref);
    setRefList(left);
    setActive('');
    t.term && t.term.reset();
    setStatus({ state: 'idle' });
    if (left.length) switchTo(left[left.length - 1]);
  }

  useEffect(() => {
    shimStyles(true);
    const ro = new ResizeObserver(resizeSoon);
    ro.observe(wrap.current);
    const onTheme = () => { if (t.term) t.term.options.theme = darkQuery.matches ? DARK : LIGHT; };
    darkQuery.addEventListener('change', onTheme);
    // Attach to the session's newest terminal, if it has one.
    (async () => {
      try {
        const listed = (await ctx.api.get(base)).map((x) => x.ref);
        if (t.detached) return;
        setRefList([...listed, ...t.refs.filter((r) => !listed.includes(r))]); // one opened meanwhile stays
        if (listed.length && !t.ref) await switchTo(listed[listed.length - 1]);
      } catch (e) {
        setStatus({ state: 'error', error: e && e.code === 'terminal_unavailable' ? 'Terminals are not available on this kernel.' : errorText(e) });
      }
    })();
    return () => {
      t.detached = true;
      clearTimeout(t.resizeTimer);
      ro.disconnect();
      darkQuery.removeEventListener('change', onTheme);
      if (t.stream) t.stream.close();
      // The shell keeps running in the kernel (closing it is explicit); only the view goes.
      if (t.term) t.term.dispose();
      t.term = null;
      shimStyles(false);
    };
  }, [sid]);

  const exited = status.state === 'exited';
  // A tap anywhere on the terminal focuses the shell: xterm alone misses a tap made while it
  // is still settling after the open.
  return html`
    <section class="f-view f-terminal-view">
      <header class="f-view-head">
        <a class="f-btn f-btn-ghost" href=${`#/s/${encodeURIComponent(sid)}`}>← Chat</a>
        <h2 class="f-title">Terminal</h2>
        <button type="button" class="f-btn f-btn-primary" data-testid="terminal-open" disabled=${busy} onClick=${open}>
          ${active ? 'New shell' : 'Open terminal'}</button>
      </header>
      ${refs.length > 1 && html`<div class="f-tabs" role="tablist">
        ${refs.map((r, i) => html`<button type="button" role="tab" key=${r} aria-selected=${r === active ? 'true' : 'false'}
            class=${'f-btn' + (r === active ? ' f-btn-on' : '')} onClick=${() => switchTo(r)}>Shell ${i + 1}</button>`)}
      </div>`}
      <p class="f-small f-muted" role="status" data-testid="terminal-status" data-state=${status.state}>
        ${status.state === 'idle' && 'No terminal open. A terminal is a shell in the session’s working directory.'}
        ${status.state === 'loading' && 'Starting…'}
        ${status.state === 'running' && 'Running'}
        ${exited && `Exited${status.code != null ? ` with code ${status.code}` : ''}`}
        ${status.state === 'error' && html`<span class="f-error">${status.error}</span>`}
      </p>
      <div class=${'f-term' + (active ? '' : ' f-term-empty')} data-testid="terminal" ref=${wrap}
           onClick=${() => t.term && t.term.focus()}></div>
      ${active && html`<div class="f-keys" aria-label="Special keys">
        ${KEYS.map(([label, seq, name]) => html`<button type="button" class="f-btn f-key" disabled=${exited} aria-label=${name}
            onPointerDown=${(e) => e.preventDefault()} onClick=${() => { send(seq); t.term && t.term.focus(); }}>${label}</button>`)}
        <button type="button" class="f-btn f-btn-danger f-key" disabled=${busy} onClick=${close} data-testid="terminal-close">Close</button>
      </div>`}
    </section>`;
}

/** Contract entry point: the terminals of `ctx.sessionId`. */
export function mount(el, ctx) {
  render(html`<${TerminalView} ctx=${ctx} />`, el);
  return () => render(null, el);
}
