// bars.js: usage and budget bars with their colour thresholds.
//
// Usage follows the policy's thresholds: new sandboxes are refused above
// 85 % memory or disk (P3, "warn"); a node above 96 % memory or 92 % disk
// has its sandboxes reclaimed (R3, "crit"). A budget is "warn" from 85 %
// and "crit" when full.

import { el } from './dom.js';

export const USAGE = Object.freeze({
  memory: Object.freeze({ warn: 85, crit: 96 }),
  disk: Object.freeze({ warn: 85, crit: 92 }),
});

export const BUDGET = Object.freeze({ warn: 85, crit: 100 });

// level names a percentage's band: ok, warn, crit, or unknown when it is
// not a finite number.
export function level(pct, t) {
  if (typeof pct !== 'number' || !Number.isFinite(pct)) return 'unknown';
  if (pct >= t.crit) return 'crit';
  if (pct >= t.warn) return 'warn';
  return 'ok';
}

// percent is used/limit in percent; NaN when the limit is missing or not
// positive.
export function percent(used, limit) {
  if (typeof used !== 'number' || typeof limit !== 'number' || !Number.isFinite(used) || !(limit > 0)) return NaN;
  return (used * 100) / limit;
}

function fmtPct(pct) {
  return Number.isFinite(pct) ? `${pct.toFixed(1)} %` : 'unknown';
}

// bar draws one bar: kind names it for the page (data-kind), text is what
// it says beside the label (default: the percentage).
export function bar(kind, label, pct, thresholds, text) {
  const lv = level(pct, thresholds);
  const fill = el('span', { class: 'fill' });
  // CSSOM, not a style attribute: allowed by style-src 'self'.
  fill.style.width = `${Number.isFinite(pct) ? Math.max(0, Math.min(100, pct)) : 0}%`;
  const shown = text === undefined ? fmtPct(pct) : text;
  const b = el('div', {
    class: `bar ${lv}`,
    dataset: { kind, level: lv },
    title: `${label}: ${shown}`,
    aria: { label: `${label} ${shown}` },
  },
  el('span', { class: 'track' }, fill),
  el('span', { class: 'bar-text', text: `${label} ${shown}` }));
  b.setAttribute('role', 'img');
  return b;
}

// usageBars draws memory and disk use; usage may be null (stats unread).
export function usageBars(usage) {
  if (!usage || typeof usage !== 'object') return [el('span', { class: 'hint', text: 'usage unknown' })];
  return [
    bar('memory', 'mem', usage.memory_percent, USAGE.memory),
    bar('disk', 'disk', usage.disk_percent, USAGE.disk),
  ];
}

// budgetBars draws sandboxes, CPU and memory used against the limits.
export function budgetBars(budget) {
  const limits = (budget && budget.limits) || {};
  const used = (budget && budget.used) || {};
  const one = (kind, label, u, l, unit) => bar(kind, label, percent(u, l), BUDGET,
    `${num(u)}/${num(l)}${unit}`);
  return [
    one('sandboxes', 'sbx', used.sandboxes, limits.max_sandboxes, ''),
    one('cpu', 'cpu', used.cpu_mhz, limits.cpu_mhz, ' MHz'),
    one('memory-budget', 'mem', used.memory_mb, limits.memory_mb, ' MB'),
  ];
}

function num(v) {
  return typeof v === 'number' && Number.isFinite(v) ? String(v) : '?';
}
