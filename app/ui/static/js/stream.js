// The session event follower: the live model of one open chat.
//
// It loads the stored history, then follows `GET /sessions/{id}/events` from the last stored
// message's seq (`Last-Event-ID`), so every stored event since (tool cards, approvals,
// questions, the queue) is replayed, then live ones come with no gap and no duplicate (the
// kernel dedupes by seq: app/kernel/streams.py).
//
// Text being generated is never stored as deltas. The kernel sends a `message_snapshot` (the
// partial message so far) as the first event of a stream opened mid-generation, and the deltas
// that follow continue exactly that text (app/kernel/operations.py). So on every (re)connect
// the partial on screen is *replaced* by the snapshot, never appended to: words streamed before
// the drop are not doubled, words missed during it are not lost. When the message ends, its
// stored `message_end` content replaces the partial entirely (deltas are lossy under load).
//
// Deltas are buffered and applied once per animation frame; listeners of the partial (`live`)
// are told per frame, listeners of the conversation (`change`) per stored event, so a 20,000
// delta reply costs a few hundred small DOM updates, never a re-render of the conversation.

import api from './api.js';

const PAGE = 200; // messages asked per history page (and shown per `older` step)

const enc = encodeURIComponent;

export class SessionFollower {
  constructor(sessionId, session) {
    this.id = sessionId;
    this.base = `/sessions/${enc(sessionId)}`;
    this.session = session || null;
    this.messages = []; // stored messages, oldest first, each with event_seq
    this.seqs = new Set();
    this.tools = new Map(); // tool call id → {id, name, input, status, output, diff, …}
    this.owner = new Map(); // tool call id → the assistant message holding the call
    this.live = { text: '', reasoning: '', toolIds: [] }; // the reply being generated
    this.notes = []; // unstored lines: errors, a turn that ended without a message
    this.approvals = new Map();
    this.questions = new Map();
    this.queue = [];
    this.running = !!session && session.phase === 'turn';
    this.compacting = !!session && session.phase === 'compaction';
    this.more = false; // the server has older messages than `messages[0]`
    this.loaded = false;
    this.error = '';
    this.gone = false;
    this.rev = 0; // bumped on every change of the conversation
    this._handlers = new Map(); // kind → Set(fn): ctx.events for the feature views
    this._change = new Set();
    this._liveFns = new Set();
    this._pending = { text: [], reasoning: [] };
    this._frame = 0;
    this._fresh = false; // a stream just opened: the next event may be its snapshot
    this._snapshot = null; // text of the last snapshot until a delta or its message_end
    this._stream = null;
    this.events = { on: (kind, fn) => this.on(kind, fn) };
  }

  // --- subscriptions ---------------------------------------------------------------------

  /** `fn(envelope)` for every event of `kind` ('*' for all); returns an off function. */
  on(kind, fn) {
    if (!this._handlers.has(kind)) this._handlers.set(kind, new Set());
    this._handlers.get(kind).add(fn);
    return () => this._handlers.get(kind).delete(fn);
  }

  onChange(fn) {
    this._change.add(fn);
    return () => this._change.delete(fn);
  }

  onLive(fn) {
    this._liveFns.add(fn);
    return () => this._liveFns.delete(fn);
  }

  _changed() {
    this.rev++;
    for (const fn of this._change) fn(this.rev);
  }

  _liveChanged() {
    for (const fn of this._liveFns) fn(this.live);
  }

  // --- loading ---------------------------------------------------------------------------

  /** Load the last page of history and the queue, then follow the stream. */
  async open() {
    try {
      // The session list is read again for the phase: the one the shell holds may be old.
      const [page, queue, sessions] = await Promise.all([
        this._history(null),
        api.get(`${this.base}/queue`).catch(() => []),
        api.get('/sessions').catch(() => null),
      ]);
      const found = Array.isArray(sessions) && sessions.find((s) => s.id === this.id);
      if (found) {
        this.session = found;
        this.running = found.phase === 'turn';
        this.compacting = found.phase === 'compaction';
      }
      this.messages = [];
      this.seqs.clear();
      this._prepend(page);
      this.queue = Array.isArray(queue) ? queue : [];
      this.loaded = true;
    } catch (e) {
      this.error = e.message || String(e);
      this.loaded = true;
      this._changed();
      if (e.status === 404) this.gone = true;
      return;
    }
    this._changed();
    const head = this.messages.length ? this.messages[this.messages.length - 1].event_seq : 0;
    this._stream = api.stream(`${this.base}/events`, {
      after: head,
      onOpen: () => {
        this._fresh = true;
      },
      onEvent: (kind, data) => this._event(kind, data),
      onGone: () => this._deleted(),
    });
  }

  close() {
    if (this._stream) this._stream.close();
    this._stream = null;
    if (this._frame) cancelAnimationFrame(this._frame);
    this._frame = 0;
    this._change.clear();
    this._liveFns.clear();
    this._handlers.clear();
  }

  // The route may page (`before`, `limit`) or answer the whole history; both are handled:
  // an answer longer than the limit is the whole history, kept and paged locally.
  async _history(before) {
    const query = before ? `?before=${before}&limit=${PAGE}` : `?limit=${PAGE}`;
    const list = await api.get(`${this.base}/history${query}`);
    const items = Array.isArray(list) ? list : (list && list.messages) || [];
    this.more = items.length === PAGE;
    return items;
  }

  /** Fetch the page before the oldest message held; resolves to how many came. */
  async older() {
    if (!this.more || !this.messages.length) return 0;
    const page = await this._history(this.messages[0].event_seq);
    const fresh = page.filter((m) => !this.seqs.has(m.event_seq));
    this._prepend(fresh);
    this._changed();
    return fresh.length;
  }

  _prepend(items) {
    const calls = [];
    for (const m of items) {
      if (m.event_seq) this.seqs.add(m.event_seq);
      if (m.role === 'assistant') calls.push(m);
    }
    this.messages = items.concat(this.messages);
    // Calls first, then results, whatever page order they arrived in.
    for (const m of calls) this._claim(m);
    for (const m of items) if (m.role === 'tool') this._result(m);
  }

  // --- the event handler -----------------------------------------------------------------

  _event(kind, env) {
    const payload = env && typeof env === 'object' ? env.payload : env;
    const seq = env && env.seq;
    if (kind === 'message_delta' || kind === 'reasoning_delta') {
      if (this._fresh) this._reset(null);
      this._snapshot = null;
      (kind === 'message_delta' ? this._pending.text : this._pending.reasoning).push(String(payload ?? ''));
      if (!this._frame) this._frame = requestAnimationFrame(() => this._flush());
      this._emit(kind, env);
      return;
    }
    this._flush(); // a stored event lands after the text that preceded it
    if (this._fresh) this._reset(kind === 'message_snapshot' ? payload : null);
    if (kind !== 'message_snapshot') this._apply(kind, payload, seq, env);
    this._emit(kind, env);
  }

  _emit(kind, env) {
    for (const k of [kind, '*']) {
      const fns = this._handlers.get(k);
      if (fns) for (const fn of fns) {
        try {
          fn(env);
        } catch (e) {
          console.error('event listener failed', kind, e);
        }
      }
    }
  }

  // First event of a (re)opened stream: the snapshot is the partial, or there is none.
  _reset(snapshot) {
    this._fresh = false;
    this._pending = { text: [], reasoning: [] };
    const text = (snapshot && snapshot.content) || '';
    const reasoning = (snapshot && snapshot.reasoning) || '';
    this._snapshot = snapshot ? text : null;
    if (snapshot) this.running = true;
    if (text === this.live.text && reasoning === this.live.reasoning) return;
    this.live = { ...this.live, text, reasoning };
    this._liveChanged();
  }

  _flush() {
    if (this._frame) cancelAnimationFrame(this._frame);
    this._frame = 0;
    const { text, reasoning } = this._pending;
    if (!text.length && !reasoning.length) return;
    this._pending = { text: [], reasoning: [] };
    this.live = {
      ...this.live,
      text: text.length ? this.live.text + text.join('') : this.live.text,
      reasoning: reasoning.length ? this.live.reasoning + reasoning.join('') : this.live.reasoning,
    };
    this.running = true;
    this._liveChanged();
  }

  _apply(kind, p, seq, env) {
    switch (kind) {
      case 'message_end':
      case 'message_imported':
        return this._message({ ...p, event_seq: p.event_seq || seq, created_at: p.created_at || (env && env.time) });
      case 'tool_begin':
      case 'tool_update':
      case 'tool_end':
        return this._tool(kind, p);
      case 'approval_request':
        this.approvals.set(p.id, p);
        return this._changed();
      case 'approval_resolved':
        this.approvals.delete(p.id);
        return this._changed();
      case 'question_requested':
        this.questions.set(p.id, p);
        return this._changed();
      case 'question_resolved':
        this.questions.delete(p.id);
        return this._changed();
      case 'queue_updated':
        this.queue = (p && p.items) || [];
        return this._changed();
      case 'turn_started':
        this.running = true;
        this.notes = [];
        return this._changed();
      case 'turn_complete':
        return this._turnComplete(p);
      case 'error':
        this.notes = [...this.notes, { kind: 'error', text: typeof p === 'string' ? p : JSON.stringify(p) }];
        return this._changed();
      case 'compaction_started':
        this.compacting = true;
        return this._changed();
      case 'compaction_completed':
      case 'compaction_failed':
        this.compacting = false;
        return this._changed();
      case 'session_updated':
        if (p && p.id === this.id) this.session = p;
        return this._changed();
      case 'session_deleted':
        return this._deleted();
      case 'history_rewound':
        return this._rewound(p);
      default:
    }
  }

  _message(m) {
    if (m.event_seq && this.seqs.has(m.event_seq)) return;
    if (m.event_seq) this.seqs.add(m.event_seq);
    if (m.role === 'assistant') {
      // A message replayed from before the snapshot is not the one the snapshot holds: it is
      // added but leaves the partial alone. Otherwise this is the partial, now stored.
      const older = this._snapshot != null && !String(m.content || '').startsWith(this._snapshot);
      if (!older) {
        this._snapshot = null;
        this._pending = { text: [], reasoning: [] };
        const ids = new Set((m.tool_calls || []).map((c) => c.id));
        this.live = { text: '', reasoning: '', toolIds: this.live.toolIds.filter((id) => !ids.has(id)) };
        this._liveChanged();
      }
      this._claim(m);
    }
    this.messages = this.messages.concat([m]);
    if (m.role === 'tool') this._result(m);
    this._changed();
  }

  // An assistant message's calls become its cards (state from events wins over `queued`).
  _claim(m) {
    for (const call of m.tool_calls || []) {
      const known = this.tools.get(call.id);
      this.tools.set(call.id, { ...call, ...known, input: call.input || (known && known.input) || '' });
      this.owner.set(call.id, m);
    }
  }

  // A stored tool result fills its card.
  _result(m) {
    const id = m.tool_call_id;
    if (!id) return;
    const known = this.tools.get(id) || { id, name: m.name || 'tool', input: '' };
    this.tools.set(id, {
      ...known,
      output: typeof m.content === 'string' ? m.content : JSON.stringify(m.content),
      status: m.is_error ? 'error' : 'done',
      diff: m.diff || known.diff,
      attachments: m.attachments || known.attachments,
      stored: true,
    });
    this._touch(id);
  }

  _tool(kind, p) {
    if (!p || !p.id) return;
    const known = this.tools.get(p.id) || { id: p.id, name: p.name, input: '', status: 'queued' };
    const next = { ...known };
    if (p.name) next.name = p.name;
    if (p.input) next.input = p.input;
    if (p.status) next.status = p.status;
    if (p.output != null) next.output = p.output;
    if (p.diff) next.diff = p.diff;
    if (p.attachments) next.attachments = p.attachments;
    if (kind === 'tool_end') next.status = p.is_error ? 'error' : 'done';
    else if (p.is_error) next.status = 'error';
    if (known.stored) return; // the stored result is final
    this.tools.set(p.id, next);
    if (!this.owner.has(p.id) && !this.live.toolIds.includes(p.id)) {
      this.live = { ...this.live, toolIds: [...this.live.toolIds, p.id] };
    }
    this._touch(p.id);
    this._liveChanged();
    this._changed();
  }

  // A card changed: its message is replaced, so only that message re-renders.
  _touch(id) {
    const m = this.owner.get(id);
    if (!m) return;
    const i = this.messages.lastIndexOf(m);
    if (i < 0) return;
    const copy = { ...m };
    this.messages = this.messages.slice();
    this.messages[i] = copy;
    for (const call of copy.tool_calls || []) this.owner.set(call.id, copy);
  }

  _turnComplete(p) {
    this.running = false;
    this.approvals.clear(); // a finished turn waits for nothing
    this.questions.clear();
    const last = this.messages[this.messages.length - 1];
    const status = p && p.status;
    const covered = last && last.role === 'assistant' && last.turn_status;
    if (status && status !== 'completed' && !covered) {
      this.notes = [...this.notes, { kind: status, text: status === 'cancelled' ? 'Turn stopped' : `Turn ${status}${p.reason ? `: ${p.reason}` : ''}` }];
    }
    if (this.live.text || this.live.reasoning || this.live.toolIds.length) {
      this.live = { text: '', reasoning: '', toolIds: [] };
      this._liveChanged();
    }
    this._changed();
  }

  // Rewound to before a user message: drop it and everything after (the kernel's history is
  // the active messages; reloading the tail keeps paging intact).
  _rewound(p) {
    const target = Number((p && p.target_user_seq) || 0);
    const i = this.messages.findIndex((m) => m.event_seq === target);
    if (i >= 0) {
      for (const m of this.messages.slice(i)) this.seqs.delete(m.event_seq);
      this.messages = this.messages.slice(0, i);
    }
    this.live = { text: '', reasoning: '', toolIds: [] };
    this.notes = [];
    this._liveChanged();
    this._changed();
  }

  _deleted() {
    this.gone = true;
    if (this._stream) this._stream.close();
    this._changed();
  }

  // --- actions ---------------------------------------------------------------------------

  send(message) {
    return api.post(`${this.base}/turns`, { message });
  }

  cancel() {
    return api.post(`${this.base}/cancel`);
  }

  async decide(approvalId, decision) {
    await api.post(`${this.base}/approvals/${enc(approvalId)}`, { decision });
    this.approvals.delete(approvalId);
    this._changed();
  }

  async answer(batchId, answers) {
    await api.post(`${this.base}/questions/${enc(batchId)}/answer`, { answers });
    this.questions.delete(batchId);
    this._changed();
  }

  async skipQuestions(batchId) {
    await api.post(`${this.base}/questions/${enc(batchId)}/cancel`);
    this.questions.delete(batchId);
    this._changed();
  }

  enqueue(message) {
    return api.post(`${this.base}/queue`, { message });
  }

  editQueued(itemId, change) {
    return api.patch(`${this.base}/queue/${enc(itemId)}`, change);
  }

  deleteQueued(itemId) {
    return api.del(`${this.base}/queue/${enc(itemId)}`);
  }

  dispatchQueued(itemId) {
    return api.post(`${this.base}/queue/${enc(itemId)}/dispatch`);
  }

  cancelTool(toolId) {
    return api.post(`${this.base}/tools/${enc(toolId)}/cancel`);
  }
}

export { PAGE };
