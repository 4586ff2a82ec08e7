// overview.js: the overview, where an operator lands. The live sandboxes,
// the budget used across the cluster (what the enrolled hosts' budgets
// hold against their limits: sandboxes, CPU, memory) and the policy's
// denials in the last hour, each read from its own route and refreshed
// while the view is shown (live.js).
//
// Each section is one entry of SECTIONS: the scope its route needs (a
// token without it does not see the section, access.js), its element in
// index.html and its loader. A section added later (the pool's state) is
// one more entry and one more <section class="card"> in the page.

import { may } from './access.js';
import { ApiError, request } from './api.js';
import { BUDGET, bar, percent } from './bars.js';
import {
  byId, clear, describe, el, fmtTime,
} from './dom.js';
import { Poller } from './live.js';

export const EVERY_MS = 10000; // the denials' query reads the retained log: not every 5 s
const MAX_PAGES = 10; // pages of 1000 read per figure; past them the figure is a lower bound
const HOUR_MS = 3600 * 1000;

// clusterBudget sums the budgets of the enrolled hosts of GET /v1/hosts:
// {hosts, used: {sandboxes, cpu_mhz, memory_mb}, limits: {max_sandboxes,
// cpu_mhz, memory_mb}}. A figure a host lacks counts as 0.
export function clusterBudget(hosts) {
  const out = {
    hosts: 0,
    used: { sandboxes: 0, cpu_mhz: 0, memory_mb: 0 },
    limits: { max_sandboxes: 0, cpu_mhz: 0, memory_mb: 0 },
  };
  for (const h of Array.isArray(hosts) ? hosts : []) {
    if (!h || typeof h.enrollment !== 'string' || h.enrollment === '' || h.enrollment === 'none') continue;
    out.hosts += 1;
    const used = (h.budget && h.budget.used) || {};
    const limits = (h.budget && h.budget.limits) || {};
    for (const k of Object.keys(out.used)) out.used[k] += finite(used[k]);
    for (const k of Object.keys(out.limits)) out.limits[k] += finite(limits[k]);
  }
  return out;
}

function finite(v) {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0;
}

// countBy counts a list's entries by a key: [[value, count]...], the
// largest first, then by value.
export function countBy(list, key) {
  const m = new Map();
  for (const x of list) {
    for (const v of [].concat(key(x))) {
      if (typeof v === 'string' && v !== '') m.set(v, (m.get(v) || 0) + 1);
    }
  }
  return [...m.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
}

// denialRules counts denials by the rule ids that refused them.
export function denialRules(decisions) {
  return countBy(decisions, (d) => (Array.isArray(d.rule_ids) ? d.rule_ids.map(String) : []));
}

// readAll reads every page of a listing (at most MAX_PAGES): {items,
// complete}. key is the answer's list member.
async function readAll(url, key) {
  const items = [];
  let cursor = '';
  for (let i = 0; i < MAX_PAGES; i++) {
    const sep = url.includes('?') ? '&' : '?';
    const data = await request('GET', `${url}${sep}limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    const page = Array.isArray(data && data[key]) ? data[key] : [];
    items.push(...page);
    cursor = data && typeof data.next_cursor === 'string' ? data.next_cursor : '';
    if (!cursor) return { items, complete: true };
  }
  return { items, complete: false };
}

function figure(id, value, complete) {
  const o = byId(id);
  o.textContent = `${complete ? '' : '≥ '}${value}`;
  o.dataset.value = String(value);
  o.dataset.complete = String(complete);
}

// breakdown fills a list with "name: count" items, at most n of them.
function breakdown(list, pairs, n = 6) {
  clear(list);
  for (const [name, count] of pairs.slice(0, n)) {
    list.append(el('li', { dataset: { key: name, count: String(count) } }, el('code', { text: name }), ` ${count}`));
  }
  if (pairs.length > n) list.append(el('li', { class: 'hint', text: `and ${pairs.length - n} more` }));
}

async function loadLive() {
  const { items, complete } = await readAll('/v1/sandboxes', 'sandboxes');
  figure('overview-live-count', items.length, complete);
  breakdown(byId('overview-live-states'), countBy(items, (s) => String(s.state || '')));
  breakdown(byId('overview-live-nodes'), countBy(items, (s) => String(s.node || '')));
}

async function loadBudget() {
  const data = await request('GET', '/v1/hosts');
  const b = clusterBudget(data && data.hosts);
  const one = (kind, label, used, limit, unit) => bar(kind, label, percent(used, limit), BUDGET, `${used}/${limit}${unit}`);
  const bars = byId('overview-budget-bars');
  bars.replaceChildren(
    one('sandboxes', 'sandboxes', b.used.sandboxes, b.limits.max_sandboxes, ''),
    one('cpu', 'cpu', b.used.cpu_mhz, b.limits.cpu_mhz, ' MHz'),
    one('memory-budget', 'memory', b.used.memory_mb, b.limits.memory_mb, ' MB'),
  );
  bars.dataset.budget = JSON.stringify(b);
  byId('overview-budget-hosts').textContent = b.hosts === 1 ? 'across 1 enrolled host' : `across ${b.hosts} enrolled hosts`;
}

async function loadDenials(now = Date.now()) {
  const since = new Date(now - HOUR_MS).toISOString();
  const { items, complete } = await readAll(`/v1/decisions?allow=false&since=${encodeURIComponent(since)}`, 'decisions');
  figure('overview-denials-count', items.length, complete);
  byId('overview-denials-since').textContent = `since ${fmtTime(since)}`;
  byId('overview-denials-since').dataset.since = since;
  breakdown(byId('overview-denials-rules'), denialRules(items));
}

export const SECTIONS = Object.freeze([
  Object.freeze({ id: 'overview-sandboxes', scope: 'sandboxes:list', load: loadLive }),
  Object.freeze({ id: 'overview-budget', scope: 'hosts:read', load: loadBudget }),
  Object.freeze({ id: 'overview-denials', scope: 'policy:read', load: loadDenials }),
]);

const cut = new Set(); // sections the gateway refused (403) this session

// loadOverview loads every section the token may read, side by side. A
// section's failure shows in its own card; a 403 cuts it (the policy
// grants less than the token's scopes say). The first failure is thrown
// after all have drawn, so the refreshes back off.
export async function loadOverview() {
  const shown = SECTIONS.filter((s) => may(s.scope) && !cut.has(s.id));
  for (const s of SECTIONS) byId(s.id).hidden = !shown.includes(s);
  const results = await Promise.allSettled(shown.map((s) => s.load()));
  let first = null;
  results.forEach((r, i) => {
    const s = shown[i];
    const box = byId(`${s.id}-error`);
    if (r.status === 'fulfilled') {
      box.hidden = true;
      box.textContent = '';
      byId(s.id).dataset.loaded = 'true';
      return;
    }
    if (r.reason instanceof ApiError && r.reason.status === 403) {
      cut.add(s.id);
      byId(s.id).hidden = true;
      return;
    }
    box.textContent = describe(r.reason);
    box.hidden = false;
    if (!first) first = r.reason;
  });
  byId('overview-updated').textContent = `updated ${fmtTime(new Date().toISOString())}`;
  if (first) throw first;
}

const poller = new Poller(loadOverview, { every: EVERY_MS, quiet: true });

export async function showOverview() {
  poller.start();
  await loadOverview();
}

export function hideOverview() {
  poller.stop();
}

// resetOverview forgets what was shown (signing out).
export function resetOverview() {
  poller.stop();
  cut.clear();
  for (const s of SECTIONS) {
    const sec = byId(s.id);
    delete sec.dataset.loaded;
    for (const o of sec.querySelectorAll('output')) {
      o.textContent = '';
      delete o.dataset.value;
    }
    for (const l of sec.querySelectorAll('ul, .bars-box')) clear(l);
    const box = byId(`${s.id}-error`);
    box.hidden = true;
    box.textContent = '';
  }
  byId('overview-updated').textContent = '';
}
