// The kernel's API, same-origin at the root: JSON requests with the bearer token, and event
// streams read with fetch + ReadableStream (EventSource cannot send the Authorization header).
//
// The token lives in localStorage (`foya.token`) and only ever travels in the header, never in
// a URL. A 401 anywhere forgets it and tells the shell (`onUnauthorized`), which shows sign-in.
// Errors have the API's shape `{code, message}` and are thrown as `ApiError`.

const TOKEN_KEY = 'foya.token';
const BACKOFF_START = 500;
const BACKOFF_MAX = 10000;

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code || '';
  }
}

// --- the token ---------------------------------------------------------------------------

export function getToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return ''; // storage disabled (private mode): the user signs in for this page only
  }
}

export function setToken(token) {
  try {
    localStorage.setItem(TOKEN_KEY, token);
  } catch {
    memoryToken = token;
  }
}

export function clearToken() {
  memoryToken = '';
  try {
    localStorage.removeItem(TOKEN_KEY);
  } catch {
    /* nothing kept */
  }
}

let memoryToken = '';
const token = () => getToken() || memoryToken;

function authHeaders(extra) {
  const headers = { ...extra };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  return headers;
}

// --- listeners the shell sets ------------------------------------------------------------

let unauthorized = () => {};
/** Called (once per 401) after the token was forgotten. */
export function onUnauthorized(fn) {
  unauthorized = fn;
}

function refused() {
  clearToken();
  unauthorized();
}

// How many streams are waiting to reconnect: the shell shows `reconnecting` while any is.
let retrying = 0;
const retryListeners = new Set();
/** `fn(count)` whenever the number of streams retrying changes; returns an off function. */
export function onReconnecting(fn) {
  retryListeners.add(fn);
  return () => retryListeners.delete(fn);
}
function setRetrying(delta) {
  retrying = Math.max(0, retrying + delta);
  for (const fn of retryListeners) fn(retrying);
}

// --- JSON requests -----------------------------------------------------------------------

async function errorOf(res) {
  let code = '';
  let message = '';
  try {
    const text = await res.text();
    try {
      const body = JSON.parse(text);
      code = body.code || '';
      message = body.message || '';
    } catch {
      message = text.slice(0, 300);
    }
  } catch {
    /* body unreadable */
  }
  return new ApiError(res.status, code, message || res.statusText);
}

/** One API call; resolves to the parsed JSON body (null for an empty one). */
export async function request(method, path, body, { signal } = {}) {
  const init = { method, headers: authHeaders({ Accept: 'application/json' }), cache: 'no-store', signal };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network_error', 'The kernel cannot be reached');
  }
  if (res.status === 401) {
    const err = await errorOf(res);
    refused();
    throw err;
  }
  if (!res.ok) throw await errorOf(res);
  if (res.status === 204) return null;
  const text = await res.text();
  if (!text) return null;
  const type = res.headers.get('content-type') || '';
  return type.includes('json') ? JSON.parse(text) : text;
}

/** Whether `candidate` is accepted (GET /readyz), without touching the stored token. */
export async function checkToken(candidate) {
  const headers = candidate ? { Authorization: `Bearer ${candidate}` } : {};
  const res = await fetch('/readyz', { headers, cache: 'no-store' });
  return res.status;
}

// --- event streams -----------------------------------------------------------------------

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Follow an SSE route. `onEvent(kind, data, id)` gets each event (`data` parsed as JSON when it
 * is JSON); `onOpen()` runs on every (re)connection before its first event. On a drop it
 * reconnects with backoff (0.5 s doubling to 10 s) and `Last-Event-ID`: the last stored id
 * seen (frames with `id: 0`, the kernel's unstored deltas, do not move it). Returns `{close()}`.
 */
export function stream(path, { onEvent, onOpen, onGone, lastEventId, after } = {}) {
  let closed = false;
  let controller = null;
  let lastId = lastEventId != null && lastEventId !== '' ? String(lastEventId) : '';
  let waiting = false; // counted in `retrying`

  const mark = (on) => {
    if (on !== waiting) {
      waiting = on;
      setRetrying(on ? 1 : -1);
    }
  };

  function dispatch(kind, data, id) {
    let parsed = data;
    if (data && (data[0] === '{' || data[0] === '[' || data[0] === '"')) {
      try {
        parsed = JSON.parse(data);
      } catch {
        /* not JSON: hand over the text */
      }
    }
    try {
      onEvent && onEvent(kind || 'message', parsed, id);
    } catch (e) {
      console.error('event handler failed', kind, e); // one bad event must not end the stream
    }
  }

  // The SSE parser (HTML standard): fields per line, an empty line dispatches.
  async function read(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let kind = '';
    let data = [];
    let id = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        let end = buffer.indexOf('\n', start);
        if (end < 0) break;
        let line = buffer.slice(start, end);
        start = end + 1;
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length) dispatch(kind, data.join('\n'), id);
          kind = '';
          data = [];
          continue;
        }
        if (line[0] === ':') continue; // a comment: ": ok", heartbeats
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value[0] === ' ') value = value.slice(1);
        if (field === 'data') data.push(value);
        else if (field === 'event') kind = value;
        else if (field === 'id') {
          id = value;
          // `id: 0` names no stored event; an empty id is the kernel saying "you have none".
          if (value !== '0') lastId = value;
        }
      }
      buffer = buffer.slice(start);
    }
  }

  async function run() {
    let delay = BACKOFF_START;
    while (!closed) {
      controller = new AbortController();
      try {
        const headers = authHeaders({ Accept: 'text/event-stream' });
        if (lastId) headers['Last-Event-ID'] = lastId;
        // Until a stored event has been seen, `after` (when given) is the cursor: `?after=0`
        // replays everything, where no Last-Event-ID would mean "live only" and lose what was
        // stored between reading the history and this request.
        const url = !lastId && after != null ? `${path}${path.includes('?') ? '&' : '?'}after=${after}` : path;
        const res = await fetch(url, { headers, cache: 'no-store', signal: controller.signal });
        if (res.status === 401) {
          refused();
          break;
        }
        if (res.status === 404) {
          onGone && onGone(); // the session was deleted: nothing to come back to
          break;
        }
        if (!res.ok || !res.body) throw await errorOf(res);
        mark(false);
        delay = BACKOFF_START;
        onOpen && onOpen();
        await read(res.body);
      } catch (e) {
        if (closed) break;
        if (!(e && e.name === 'AbortError')) console.debug('stream dropped', path, e && e.message);
      }
      if (closed) break;
      mark(true);
      await sleep(delay);
      delay = Math.min(delay * 2, BACKOFF_MAX);
    }
    mark(false);
  }

  run();
  return {
    close() {
      closed = true;
      mark(false);
      if (controller) controller.abort();
    },
    get lastEventId() {
      return lastId;
    },
  };
}

const api = {
  get: (path, opts) => request('GET', path, undefined, opts),
  post: (path, body, opts) => request('POST', path, body === undefined ? {} : body, opts),
  put: (path, body, opts) => request('PUT', path, body, opts),
  patch: (path, body, opts) => request('PATCH', path, body, opts),
  del: (path, opts) => request('DELETE', path, undefined, opts),
  stream,
};

export default api;
