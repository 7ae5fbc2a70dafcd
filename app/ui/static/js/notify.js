// System notifications for what needs the user while the page is hidden: an approval or a
// question waiting, a turn finished. Permission is only ever asked from a user gesture (the
// bell button), as browsers require and users expect; nothing is shown while the page is in
// view, where the chat itself shows it.
//
// With push turned on (views/push.js) the kernel notifies too, with the same tags: a browser
// shows one notification per fact.
//
// On Android, `new Notification()` throws: the service worker's `showNotification` is used when
// a worker is registered.

const APPROVAL_GRACE_MS = 1000;
const supported = typeof window !== 'undefined' && 'Notification' in window;

export function permission() {
  return supported ? Notification.permission : 'unsupported';
}

/** Ask for permission; call from a click handler only. Resolves to the permission. */
export async function ask() {
  if (!supported) return 'unsupported';
  if (Notification.permission !== 'default') return Notification.permission;
  try {
    return await Notification.requestPermission();
  } catch {
    return Notification.permission;
  }
}

/** Show `title` with `body` if the page is hidden and notifications are allowed. */
export async function notify(title, body, { tag, hash } = {}) {
  if (!supported || Notification.permission !== 'granted' || !document.hidden) return;
  const options = { body: String(body || '').slice(0, 200), tag, icon: '/ui/icons/icon-192.png', data: { hash } };
  try {
    const reg = 'serviceWorker' in navigator ? await navigator.serviceWorker.getRegistration('/ui/') : null;
    if (reg && reg.active) { // a worker still installing cannot show one
      await reg.showNotification(title, options);
      return;
    }
    const n = new Notification(title, options);
    n.onclick = () => {
      window.focus();
      if (hash) location.hash = hash;
      n.close();
    };
  } catch (e) {
    console.debug('notification failed', e);
  }
}

/** Notifications for a session follower's events; returns an off function. */
export function watch(follower, title) {
  const name = () => title() || 'Foya';
  const hash = `#/s/${encodeURIComponent(follower.id)}`;
  const offs = [
    follower.on('approval_request', (env) => {
      const p = (env && env.payload) || {};
      // A hook or the guardian (approval mode auto) may decide at once: only one still waiting
      // after a moment needs the user (the kernel's push waits the same: app/kernel/push).
      setTimeout(() => {
        if (!follower.approvals.has(p.id)) return;
        notify(`${name()}: approval needed`, `${p.tool_name || 'A tool'} wants to ${p.action || 'act'}${p.resource ? `: ${p.resource}` : ''}`, { tag: `approval-${p.id}`, hash });
      }, APPROVAL_GRACE_MS);
    }),
    follower.on('question_requested', (env) => {
      const p = (env && env.payload) || {};
      const q = (p.questions && p.questions[0] && p.questions[0].question) || 'The agent asks a question';
      notify(`${name()}: question`, q, { tag: `question-${p.id}`, hash });
    }),
    follower.on('turn_complete', (env) => {
      const p = (env && env.payload) || {};
      const status = p.status || 'completed';
      notify(name(), status === 'completed' ? 'The reply is ready' : `The turn ${status}`, { tag: `turn-${follower.id}`, hash });
    }),
  ];
  return () => offs.forEach((off) => off());
}

// The service worker's notificationclick asks an open tab to route to the notified chat.
if (typeof navigator !== 'undefined' && 'serviceWorker' in navigator) {
  navigator.serviceWorker.addEventListener('message', (e) => {
    const m = e.data || {};
    if (m.type === 'foya:open' && typeof m.hash === 'string' && m.hash.startsWith('#/')) location.hash = m.hash;
  });
}
