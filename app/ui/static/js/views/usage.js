// Usage: token totals over 7 or 30 days, by day and by model, as GET /usage gives them, plus
// the open session's last request (GET /sessions/{id}/usage) when there is one.
//
// GET /usage?days=7|30 → {range_days, total_tokens, input_tokens, output_tokens, cached_tokens,
// session_count, message_count, active_days, current_streak, most_used_model?,
// most_used_model_share, activity[365]{date, message_count, token_count},
// model_usage[]{model, token_count, request_count, share}}.
// The API has no per-session breakdown of the totals: "by session" is the last request only.
//
// Bars are <meter> elements: their length is an attribute, so no inline style is needed
// under the strict CSP.

import { html, render, useState, useEffect } from '../../vendor/htm/standalone.module.js';
import { errorText, payloadOf } from './review.js';

const num = new Intl.NumberFormat(undefined);
const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });
const pct = new Intl.NumberFormat(undefined, { style: 'percent', maximumFractionDigits: 1 });
const dayFmt = new Intl.DateTimeFormat(undefined, { weekday: 'short', month: 'short', day: 'numeric', timeZone: 'UTC' });

function dayLabel(iso) {
  const d = new Date(`${iso}T00:00:00Z`);
  return Number.isNaN(d.getTime()) ? iso : dayFmt.format(d);
}

function Stat({ label, value, title }) {
  return html`<div class="f-stat" title=${title || null}><div class="f-stat-value">${value}</div><div class="f-stat-label">${label}</div></div>`;
}

// Heat level 0–4 of a day against the busiest day of the year (quartiles of the maximum).
function level(tokens, max) {
  if (!tokens || !max) return 0;
  return Math.min(4, Math.ceil((tokens / max) * 4));
}

/** A year of activity, one square per day, weeks as columns (fits 360 px without scrolling). */
function Heatmap({ activity }) {
  const max = Math.max(0, ...activity.map((a) => a.token_count));
  // Blank cells before the first day so that every row is one weekday (Sunday first).
  const lead = activity.length ? new Date(`${activity[0].date}T00:00:00Z`).getUTCDay() || 0 : 0;
  return html`
    <div class="f-heat" role="img" aria-label="Token activity over the last year">
      ${Array.from({ length: lead }, (_, i) => html`<span class="f-heat-cell f-heat-blank" key=${'b' + i}></span>`)}
      ${activity.map((a) => html`<span class=${'f-heat-cell f-heat-' + level(a.token_count, max)}
        title=${`${a.date}: ${num.format(a.token_count)} tokens, ${num.format(a.message_count)} messages`}></span>`)}
    </div>`;
}

function UsageView({ ctx }) {
  const [days, setDays] = useState(30);
  const [report, setReport] = useState(null);
  const [error, setError] = useState('');
  const [loading, setLoading] = useState(false);
  const [session, setSession] = useState(null);

  useEffect(() => {
    let live = true;
    setLoading(true);
    setError('');
    ctx.api.get(`/usage?days=${days}`)
      .then((r) => { if (live) setReport(r); }, (e) => { if (live) setError(errorText(e)); })
      .finally(() => { if (live) setLoading(false); });
    return () => { live = false; };
  }, [days]);

  useEffect(() => {
    if (!ctx.sessionId) return undefined;
    let live = true;
    ctx.api.get(`/sessions/${encodeURIComponent(ctx.sessionId)}/usage`).then((u) => { if (live) setSession(u); }, () => {});
    const off = ctx.events && ctx.events.on('usage_updated', (d) => setSession(payloadOf(d)));
    return () => { live = false; if (off) off(); };
  }, [ctx.sessionId]);

  const activity = report ? [...report.activity].sort((a, b) => (a.date < b.date ? -1 : 1)) : [];
  const recent = activity.slice(-(report ? report.range_days : days)).reverse();
  const dayMax = Math.max(1, ...recent.map((a) => a.token_count));
  return html`
    <section class="f-view f-usage" data-testid="usage" aria-busy=${loading ? 'true' : 'false'}>
      <header class="f-view-head">
        <a class="f-btn f-btn-ghost" href="#/">← Chats</a>
        <h2 class="f-title">Usage</h2>
      </header>
      <div class="f-seg" role="group" aria-label="Range">
        ${[7, 30].map((d) => html`<button type="button" class=${'f-btn' + (d === days ? ' f-btn-on' : '')}
            aria-pressed=${d === days ? 'true' : 'false'} data-testid=${'usage-range-' + d}
            onClick=${() => setDays(d)}>Last ${d} days</button>`)}
      </div>
      ${error && html`<p class="f-error" role="alert">${error}</p>`}
      ${loading && !report && html`<p class="f-muted">Loading…</p>`}
      ${report && html`
        <div class="f-stats">
          <${Stat} label="Total tokens" value=${compact.format(report.total_tokens)} title=${num.format(report.total_tokens)} />
          <${Stat} label="Input" value=${compact.format(report.input_tokens)} title=${num.format(report.input_tokens)} />
          <${Stat} label="Output" value=${compact.format(report.output_tokens)} title=${num.format(report.output_tokens)} />
          <${Stat} label="Cached" value=${compact.format(report.cached_tokens)} title=${num.format(report.cached_tokens)} />
          <${Stat} label="Sessions" value=${num.format(report.session_count)} />
          <${Stat} label="Messages" value=${num.format(report.message_count)} />
          <${Stat} label="Active days" value=${num.format(report.active_days)} />
          <${Stat} label="Streak (days)" value=${num.format(report.current_streak)} />
        </div>
        ${report.most_used_model && html`<p class="f-small">Most used: <strong>${report.most_used_model}</strong>${' '}(${pct.format(report.most_used_model_share)} of tokens)</p>`}

        <h3 class="f-subtitle">By model</h3>
        ${report.model_usage.length === 0 && html`<p class="f-muted f-small">No model requests in this range.</p>`}
        <ul class="f-bars">
          ${report.model_usage.map((m) => html`<li class="f-bar" key=${m.model} data-testid="usage-model">
            <div class="f-bar-head"><span class="f-clip">${m.model}</span>
              <span class="f-muted">${compact.format(m.token_count)} · ${num.format(m.request_count)} req · ${pct.format(m.share)}</span></div>
            <meter min="0" max="1" value=${m.share} aria-label=${`${m.model} share`}></meter>
          </li>`)}
        </ul>

        ${session && html`
          <h3 class="f-subtitle">This session — last request</h3>
          <p class="f-small" data-testid="usage-session">${session.total_tokens
            ? `${num.format(session.total_tokens)} tokens (${num.format(session.input_tokens)} in, ${num.format(session.output_tokens)} out, ${num.format(session.cached_tokens)} cached)${session.model ? ' · ' + session.model : ''}`
            : 'No model request yet.'}</p>`}

        <h3 class="f-subtitle">By day</h3>
        <ul class="f-bars">
          ${recent.map((a) => html`<li class="f-bar" key=${a.date} data-testid="usage-day">
            <div class="f-bar-head"><span>${dayLabel(a.date)}</span>
              <span class="f-muted">${compact.format(a.token_count)} tokens · ${num.format(a.message_count)} msg</span></div>
            <meter min="0" max=${dayMax} value=${a.token_count} aria-label=${`${a.date} tokens`}></meter>
          </li>`)}
        </ul>

        <h3 class="f-subtitle">Last year</h3>
        <${Heatmap} activity=${activity} />`}
    </section>`;
}

/** Contract entry point: the usage report (and the session's last request if in one). */
export function mount(el, ctx) {
  render(html`<${UsageView} ctx=${ctx} />`, el);
  return () => render(null, el);
}
