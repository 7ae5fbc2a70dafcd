// The web client's service worker: the shell works offline; the API is never touched.
//
// What the shell is lives in one place, the kernel: /ui/shell.json (app/http/ui.py) lists every
// file a page loads, each with its SHA-256, and a `version`, the hash of that list. The shell is
// precached in the cache "foya-shell-<version>"; the list itself is kept in the cache
// "foya-meta" (so a restarted worker knows which cache is current). This file does not change
// when the shell does: at install and on every page load it fetches the list again, and a new
// version is precached (each file checked against its hash, so a file that changed meanwhile
// fails the update, which is tried again on the next load), then the old caches are deleted.
//
// Shell files are answered from the cache first, then revalidated in the background.
// Anything outside /ui/ (the API: sessions, events, connections, ...), any request that is not
// a GET and any request carrying credentials passes by untouched: no respondWith, never cached.

const SCOPE = new URL("./", self.location.href).pathname; // "/ui/"
const LIST = SCOPE + "shell.json";
const WORKER = SCOPE + "sw.js";
const SHELL_PREFIX = "foya-shell-";
const META = "foya-meta";

async function current() {
  const meta = await caches.open(META);
  const stored = await meta.match(LIST);
  return stored ? stored.json() : null;
}

async function sha256(response) {
  const digest = await crypto.subtle.digest("SHA-256", await response.clone().arrayBuffer());
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function precache(shell) {
  const cache = await caches.open(SHELL_PREFIX + shell.version);
  await Promise.all(
    shell.files.map(async ({ url, sha256: expected }) => {
      if (await cache.match(url)) return;
      // "no-cache": revalidated with the server, never a stale copy from the HTTP cache.
      const response = await fetch(url, { cache: "no-cache", credentials: "omit" });
      if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
      if ((await sha256(response)) !== expected) throw new Error(`${url} changed meanwhile`);
      await cache.put(url, response);
    }),
  );
}

async function prune(version) {
  const keep = SHELL_PREFIX + version;
  for (const name of await caches.keys()) {
    if (name.startsWith(SHELL_PREFIX) && name !== keep) await caches.delete(name);
  }
}

async function refresh() {
  const response = await fetch(LIST, { cache: "no-store", credentials: "omit" });
  if (response.status !== 200) throw new Error(`${LIST}: ${response.status}`);
  const shell = await response.json();
  const known = await current();
  if (known && known.version === shell.version) return;
  await precache(shell);
  const meta = await caches.open(META);
  const body = JSON.stringify(shell);
  await meta.put(LIST, new Response(body, { headers: { "content-type": "application/json" } }));
  await prune(shell.version);
}

let updating = null;

// One update at a time: page loads in quick succession share it.
function update() {
  updating ??= refresh().finally(() => {
    updating = null;
  });
  return updating;
}

async function revalidate(cache, key) {
  try {
    const response = await fetch(key, { cache: "no-cache", credentials: "omit" });
    if (response.status === 200) await cache.put(key, response);
  } catch {
    // Offline: the cached copy stands.
  }
}

async function answer(event, key) {
  const shell = await current();
  if (shell) {
    const cache = await caches.open(SHELL_PREFIX + shell.version);
    const hit = await cache.match(key);
    if (hit) {
      event.waitUntil(revalidate(cache, key));
      return hit;
    }
  }
  return fetch(event.request);
}

self.addEventListener("install", (event) => {
  event.waitUntil(update().then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    (async () => {
      const shell = await current();
      if (shell) await prune(shell.version);
      await self.clients.claim();
    })(),
  );
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET" || request.headers.has("authorization")) return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin || !url.pathname.startsWith(SCOPE)) return;
  if (url.pathname === LIST || url.pathname === WORKER) return;
  const page = request.mode === "navigate";
  const key = page && url.pathname === SCOPE + "index.html" ? SCOPE : url.pathname;
  event.respondWith(answer(event, key));
  if (page) event.waitUntil(update().catch(() => {}));
});

// A notification the page showed (js/notify.js) opens its chat: an open tab of the client
// is focused and routed there, else a new one is opened.
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const hash = (event.notification.data && event.notification.data.hash) || "#/";
  event.waitUntil(
    (async () => {
      const tabs = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
      const tab = tabs.find((c) => new URL(c.url).pathname.startsWith(SCOPE));
      if (tab) {
        await tab.focus();
        tab.postMessage({ type: "foya:open", hash });
        return;
      }
      await self.clients.openWindow(SCOPE + hash);
    })(),
  );
});

// A Web Push message from the kernel (app/kernel/push): {title, body, tag, hash}, decrypted by
// the browser. Shown unless a tab of ours is in view (its chat shows the fact already); the
// tag is the one the page's own notifications use, so one fact is one notification.
self.addEventListener("push", (event) => {
  let m = {};
  try {
    m = event.data ? event.data.json() : {};
  } catch {
    m = {};
  }
  const title = typeof m.title === "string" && m.title ? m.title : "Foya";
  const hash = typeof m.hash === "string" && m.hash.startsWith("#/") ? m.hash : "#/";
  const options = {
    body: typeof m.body === "string" ? m.body.slice(0, 200) : "",
    tag: typeof m.tag === "string" ? m.tag : undefined,
    icon: SCOPE + "icons/icon-192.png",
    data: { hash },
  };
  event.waitUntil(
    (async () => {
      const tabs = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
      if (tabs.some((c) => c.visibilityState === "visible" && c.focused)) return;
      await self.registration.showNotification(title, options);
    })(),
  );
});
