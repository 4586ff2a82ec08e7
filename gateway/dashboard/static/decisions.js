// decisions.js: the recent policy decisions of this gateway process, with
// their rule ids; refreshed every few seconds while the view is shown and
// the page is visible.

import { request } from './api.js';
import {
  byId, el, fillTable, fmtTime, run, busy,
} from './dom.js';

const EVERY_MS = 5000;
let timer = null;
let inflight = false;

export async function loadDecisions() {
  if (inflight) return;
  inflight = true;
  try {
    const limit = Number(byId('decisions-limit').value) || 50;
    const data = await request('GET', `/v1/decisions?limit=${limit}`);
    const list = Array.isArray(data && data.decisions) ? data.decisions : [];
    fillTable(byId('decisions-table').tBodies[0], byId('decisions-empty'), list.map(decisionRow));
    byId('decisions-updated').textContent = `updated ${fmtTime(new Date().toISOString())}`;
  } finally {
    inflight = false;
  }
}

function ruleIds(d) {
  const ids = Array.isArray(d.rule_ids) ? d.rule_ids.map(String) : [];
  const msgs = new Map();
  for (const v of Array.isArray(d.violations) ? d.violations : []) {
    if (v && typeof v.rule === 'string') msgs.set(v.rule, String(v.msg || ''));
  }
  if (!ids.length) return el('span', { class: 'hint', text: '—' });
  return el('span', { class: 'rules' }, ids.map((id) => el('code', { class: 'rule', text: id, title: msgs.get(id) || undefined })));
}

function decisionRow(d) {
  const allow = d.allow === true;
  const route = `${d.method || ''} ${d.route || ''}`.trim();
  const tr = el('tr', { dataset: { allow: String(allow), entrypoint: String(d.entrypoint || '') } });
  tr.append(
    el('td', { text: fmtTime(d.time), title: `decision ${d.decision_id || '?'}, bundle ${d.bundle_revision || '?'}` }),
    el('td', { text: String(d.entrypoint || '') }),
    el('td', {}, el('span', { class: `badge ${allow ? 'allow' : 'deny'}`, text: allow ? 'allow' : 'deny' }),
      d.error ? el('div', { class: 'hint bad', text: `engine error: ${d.error}` }) : null),
    el('td', {}, ruleIds(d)),
    el('td', { text: String(d.principal || '') }),
    el('td', { text: route }),
    el('td', {}, d.sandbox_id ? el('code', { text: String(d.sandbox_id) }) : '—'),
  );
  return tr;
}

function tick() {
  if (document.visibilityState === 'visible' && byId('decisions-auto').checked) run(loadDecisions);
}

// startDecisions loads now and refreshes while the view is shown.
export function startDecisions() {
  stopDecisions();
  timer = setInterval(tick, EVERY_MS);
  return loadDecisions();
}

export function stopDecisions() {
  if (timer !== null) clearInterval(timer);
  timer = null;
}

export function initDecisions() {
  byId('decisions-refresh').addEventListener('click', (ev) => busy(ev.currentTarget, loadDecisions));
  byId('decisions-limit').addEventListener('change', () => run(loadDecisions));
}
