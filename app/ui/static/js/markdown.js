// Markdown to safe HTML: marked renders, DOMPurify sanitizes every result before it reaches the
// DOM (model output is untrusted). Links open in a new tab without a referrer or opener.
// Results are kept in a small cache keyed by the text: a conversation re-rendered after an
// event re-renders the same messages, and parsing a long reply again would be wasted work.

import { marked } from '../vendor/marked/marked.esm.js';
import DOMPurify from '../vendor/dompurify/purify.es.mjs';

marked.setOptions({ gfm: true, breaks: true });

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.getAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

const PURIFY = { USE_PROFILE: { html: true }, FORBID_TAGS: ['style', 'form', 'input', 'button'], FORBID_ATTR: ['style'] };
const CACHE_MAX = 300;
const cache = new Map();

/** `text` (markdown) as sanitized HTML; `keep` false for a text seen once (a growing tail). */
export function toHtml(text, keep = true) {
  const source = String(text ?? '');
  const hit = keep ? cache.get(source) : undefined;
  if (hit !== undefined) {
    cache.delete(source); // refresh its place: least recently used goes first
    cache.set(source, hit);
    return hit;
  }
  let out;
  try {
    out = DOMPurify.sanitize(marked.parse(source), PURIFY);
  } catch (e) {
    console.error('markdown failed', e);
    out = DOMPurify.sanitize(source.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c]));
  }
  if (keep && source.length < 200000) {
    cache.set(source, out);
    if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value);
  }
  return out;
}

/** Render `text` into `el` (a live element outside Preact's control). */
export function renderInto(el, text) {
  el.innerHTML = toHtml(text);
}

const TAIL_MARKDOWN_MAX = 8000; // a longer unfinished block streams as plain text

// Where the settled part of `text` ends: after its last blank line outside a code fence (the
// text starts outside one), or 0. Blocks before it no longer change as text is appended.
function settledEnd(text) {
  if (text.lastIndexOf('\n\n') < 0) return 0;
  let end = 0;
  let fenced = false;
  let at = 0;
  while (at < text.length) {
    let nl = text.indexOf('\n', at);
    if (nl < 0) break; // the last line is unfinished
    const line = text.slice(at, nl);
    if (/^ {0,3}(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced && line.trim() === '' && at > 0) end = nl + 1;
    at = nl + 1;
  }
  return end;
}

/**
 * Paints a growing markdown text into `el` at a cost bounded by what changed: blocks that can
 * no longer change (before the last blank line outside a fence) are rendered once and kept;
 * only the unfinished block is rendered again, as markdown while it is short, else as a text
 * node that is appended to (so the browser relays out only its end). A text that is not a
 * continuation of the last (a reconnect's snapshot) is painted from scratch.
 */
export class LivePainter {
  constructor(el) {
    this.el = el;
    this.reset();
  }

  reset() {
    this.el.textContent = '';
    this.committed = '';
    this.tail = document.createElement('div');
    this.tailText = null; // the text node of a plain tail
    this.tailSource = '';
    this.el.append(this.tail);
  }

  paint(text) {
    if (!text.startsWith(this.committed)) this.reset();
    let rest = text.slice(this.committed.length);
    const cut = settledEnd(rest);
    if (cut > 0) {
      const block = document.createElement('div');
      block.className = 'md-block';
      block.innerHTML = toHtml(rest.slice(0, cut), false);
      this.el.insertBefore(block, this.tail);
      this.committed += rest.slice(0, cut);
      rest = rest.slice(cut);
    }
    if (rest === this.tailSource) return;
    if (rest.length <= TAIL_MARKDOWN_MAX) {
      this.tailText = null;
      this.tail.className = 'md-block';
      this.tail.innerHTML = toHtml(rest, false);
    } else if (this.tailText && rest.startsWith(this.tailText.data)) {
      this.tailText.appendData(rest.slice(this.tailText.data.length));
    } else {
      this.tail.className = 'md-block plain';
      this.tail.textContent = '';
      this.tailText = document.createTextNode(rest);
      this.tail.append(this.tailText);
    }
    this.tailSource = rest;
  }
}
