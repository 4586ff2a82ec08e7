// fields.js: a sandbox's image, resources, labels and times as the list
// and the panel show them. Labels are the caller's text: they reach the
// page as textContent only.

import { el, fmtTime } from './dom.js';

// mhz and mb show a resource figure with its unit; a missing one is "—".
export function mhz(v) {
  return Number.isFinite(v) && v > 0 ? `${v} MHz` : '—';
}

export function mb(v) {
  return Number.isFinite(v) && v > 0 ? `${v} MB` : '—';
}

// labelPairs are a sandbox's labels as "key=value", sorted by key.
export function labelPairs(labels) {
  if (!labels || typeof labels !== 'object' || Array.isArray(labels)) return [];
  return Object.keys(labels).sort().map((k) => `${k}=${String(labels[k])}`);
}

// labelChips shows the labels as chips; none is "—".
export function labelChips(labels) {
  const pairs = labelPairs(labels);
  if (!pairs.length) return el('span', { class: 'hint', text: '—' });
  return el('span', { class: 'label-list' }, pairs.map((p) => el('code', { class: 'label', text: p })));
}

// sandboxDetails are the term/value pairs of the panel's description list.
export function sandboxDetails(s) {
  const row = (field, term, ...value) => [el('dt', { text: term }), el('dd', { dataset: { field } }, ...value)];
  return [
    ...row('image', 'Image', el('code', { text: String(s.image || '—') })),
    ...row('cpu', 'CPU', mhz(s.cpu_mhz)),
    ...row('memory', 'Memory', mb(s.memory_mb)),
    ...row('labels', 'Labels', labelChips(s.labels)),
    ...row('node', 'Node', String(s.node || '—')),
    ...row('principal', 'Principal', String(s.principal || '—')),
    ...row('created', 'Created', fmtTime(s.created_at)),
    ...row('expires', 'Expires', fmtTime(s.expires_at)),
    ...row('ceiling', 'Ceiling', el('span', { text: fmtTime(s.ceiling_at), title: 'the lifetime ceiling: no extend goes past it' })),
  ];
}
