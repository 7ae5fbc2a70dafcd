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
const PLAIN_CHUNK = 4000; // characters per block of a plain tail (see LivePainter.seal)

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
 * only the unfinished block is rendered again, as markdown while it is short, else as plain
 * text appended to its last few-KB block (so the browser relays out only that block). A text
 * that is not a continuation of the last (a reconnect's snapshot) is painted from scratch.
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
    } else if (this.tailText && rest.startsWith(this.tailSource)) {
      this.tailText.appendData(rest.slice(this.tailSource.length));
      this.seal();
    } else {
      this.tail.className = 'md-block plain';
      this.tail.textContent = '';
      this.live = document.createElement('div');
      this.tailText = document.createTextNode(rest);
      this.live.append(this.tailText);
      this.tail.append(this.live);
      this.seal();
    }
    this.tailSource = rest;
  }

  // A plain tail is kept in blocks of about PLAIN_CHUNK characters, each cut after a newline
  // (exact: a block boundary there changes nothing on screen) or, in a text without one, after
  // a space: appending to the last block then lays out that block alone, not the whole tail.
  seal() {
    const node = this.tailText;
    while (node.length > 2 * PLAIN_CHUNK) {
      const head = node.data.slice(0, 2 * PLAIN_CHUNK);
      let cut = head.lastIndexOf('\n') + 1;
      if (cut < PLAIN_CHUNK) cut = head.lastIndexOf(' ') + 1;
      if (cut < PLAIN_CHUNK) cut = PLAIN_CHUNK;
      const block = document.createElement('div');
      block.textContent = node.data.slice(0, cut);
      this.tail.insertBefore(block, this.live);
      node.deleteData(0, cut);
    }
  }
}
