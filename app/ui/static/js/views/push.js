// Push notifications (a section of the settings page): approvals, questions and finished turns
// reach this device even while the browser is closed, through its vendor's push service.
//
// Routes: GET /push → {public_key, subscriptions[{id, label, origin, created_at}]}; POST
// /push/subscriptions {endpoint, keys{p256dh, auth}, label} → 201 (the same endpoint again
// keeps its id); DELETE /push/subscriptions/{id} → 204; POST /push/test → {delivered, failed}.
//
// The browser makes the subscription (`PushManager.subscribe` with the kernel's VAPID key) and
// keeps it; the kernel keeps its endpoint and keys. Which one is this device's is remembered in
// localStorage (`foya.push.id`), so turning it off removes this one only.

import { html, useState, useEffect, useCallback } from '../../vendor/htm/standalone.module.js';
import { errorText } from './review.js';

const MINE = 'foya.push.id';
const supported = typeof window !== 'undefined' && 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;

function keyBytes(b64url) {
  const b64 = b64url.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (b64url.length % 4)) % 4);
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

function sameKey(buffer, bytes) {
  const a = buffer ? new Uint8Array(buffer) : new Uint8Array();
  return a.length === bytes.length && a.every((b, i) => b === bytes[i]);
}

function deviceLabel() {
  const ua = navigator.userAgent;
  const os = /Android/.test(ua) ? 'Android' : /iPhone|iPad/.test(ua) ? 'iOS' : /Mac OS/.test(ua) ? 'macOS' : /Windows/.test(ua) ? 'Windows' : /Linux/.test(ua) ? 'Linux' : 'a device';
  const browser = /Edg\//.test(ua) ? 'Edge' : /Firefox\//.test(ua) ? 'Firefox' : /Chrome\//.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : 'A browser';
  return `${browser} on ${os}`;
}

async function registration() {
  const reg = await navigator.serviceWorker.getRegistration('/ui/');
  if (!reg) throw new Error('The app is still installing; reload the page and try again');
  return reg;
}

export function PushSettings({ ctx }) {
  const [info, setInfo] = useState(null);
  const [mine, setMine] = useState(() => localStorage.getItem(MINE) || '');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const load = useCallback(() => ctx.api.get('/push').then(setInfo, (e) => setError(errorText(e))), []);
  useEffect(() => { load(); }, [load]);

  async function act(work) {
    setBusy(true);
    setError('');
    try {
      await work();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
      load();
    }
  }

  const turnOn = () => act(async () => {
    if ((await Notification.requestPermission()) !== 'granted') throw new Error('Notifications are blocked for this site in the browser’s settings');
    const reg = await registration();
    const key = keyBytes(info.public_key);
    let sub = await reg.pushManager.getSubscription();
    if (sub && !sameKey(sub.options.applicationServerKey, key)) { // made for another kernel's key
      await sub.unsubscribe();
      sub = null;
    }
    sub = sub || await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
    const saved = await ctx.api.post('/push/subscriptions', { ...sub.toJSON(), label: deviceLabel() });
    localStorage.setItem(MINE, saved.id);
    setMine(saved.id);
  });

  const remove = (id) => act(async () => {
    if (id === mine) {
      const reg = await navigator.serviceWorker.getRegistration('/ui/');
      const sub = reg && await reg.pushManager.getSubscription();
      if (sub) await sub.unsubscribe();
      localStorage.removeItem(MINE);
      setMine('');
    }
    await ctx.api.del(`/push/subscriptions/${encodeURIComponent(id)}`);
  });

  const test = () => act(async () => {
    const r = await ctx.api.post('/push/test', {});
    ctx.toast && ctx.toast(r.failed ? `Sent to ${r.delivered}; ${r.failed} failed` : `Sent to ${r.delivered} device${r.delivered === 1 ? '' : 's'}`);
  });

  const subs = (info && info.subscriptions) || [];
  const here = subs.some((s) => s.id === mine);
  return html`
    <div class="f-card" data-testid="push">
      ${!supported && html`<p class="f-muted f-small">This browser cannot receive push messages${/iPhone|iPad/.test(navigator.userAgent) ? ': add the app to the home screen first' : ''}.</p>`}
      ${supported && info && html`<div class="f-row">
        ${here
          ? html`<button class="f-btn" disabled=${busy} data-testid="push-off" onClick=${() => remove(mine)}>Turn off on this device</button>`
          : html`<button class="f-btn f-btn-primary" disabled=${busy} data-testid="push-on" onClick=${turnOn}>Turn on for this device</button>`}
        ${subs.length > 0 && html`<button class="f-btn" disabled=${busy} data-testid="push-test" onClick=${test}>Send a test</button>`}
      </div>`}
      ${error && html`<p class="f-error f-small" role="alert">${error}</p>`}
      ${subs.length > 0 && html`<ul class="f-push-devices" data-testid="push-devices">
        ${subs.map((s) => html`<li class="f-push-device" key=${s.id} data-testid="push-device">
          <div><span>${s.label || 'A browser'}${s.id === mine ? ' (this device)' : ''}</span>
          <span class="f-muted f-small">${s.origin} · since ${new Date(s.created_at).toLocaleDateString()}</span></div>
          <button class="f-btn f-btn-ghost" disabled=${busy} aria-label=${`Remove ${s.label}`} onClick=${() => remove(s.id)}>Remove</button>
        </li>`)}
      </ul>`}
    </div>`;
}
