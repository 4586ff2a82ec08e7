// decisions.js: the policy decisions of this gateway, newest first, with
// their rule ids, violation messages and decision ids; filtered by result,
// entrypoint, principal and rule (the query parameters of GET
// /v1/decisions) and refreshed every few seconds while the view is shown
// and the page is visible.

import { request } from './api.js';
import {
  byId, el, fillTable, fmtTime, InputError, run, busy, submitForm, textField,
} from './dom.js';

const EVERY_MS = 5000;

// ENTRYPOINTS are the decisions the log holds (docs/api.md).
export const ENTRYPOINTS = Object.freeze(['authz', 'admission', 'lifecycle', 'hosts', 'reclaim']);

// The bounds GET /v1/decisions enforces on its filters.
const MAX_PRINCIPAL_BYTES = 128;
const RULE_ID = /^[A-Z0-9_.-]{1,32}$/;

let timer = null;
let ticking = false;
let applied = '?limit=50'; // the query of the filters last applied
let seq = 0; // the newest load; an older answer is dropped

// decisionsQuery builds the query of GET /v1/decisions from the filters:
// allow is '' (all), 'true' or 'false'; empty filters are left out. A
// filter the gateway would refuse throws InputError.
export function decisionsQuery({
  allow = '', entrypoint, principal, rule, limit = 50,
} = {}) {
  const q = new URLSearchParams();
  if (allow !== '') {
    if (allow !== 'true' && allow !== 'false') throw new InputError('result must be all, allowed or denied');
    q.set('allow', allow);
  }
  if (entrypoint !== undefined) {
    if (!ENTRYPOINTS.includes(entrypoint)) throw new InputError(`entrypoint must be one of ${ENTRYPOINTS.join(', ')}`);
    q.set('entrypoint', entrypoint);
  }
  if (principal !== undefined) {
    if (new TextEncoder().encode(principal).length > MAX_PRINCIPAL_BYTES) {
      throw new InputError(`principal must be at most ${MAX_PRINCIPAL_BYTES} bytes, e.g. agent:ci`);
    }
    q.set('principal', principal);
  }
  if (rule !== undefined) {
    const id = rule.toUpperCase(); // rule ids are upper case: P2, T2, INPUT
    if (!RULE_ID.test(id)) throw new InputError('rule must be a rule id, e.g. P2 or T2');
    q.set('rule', id);
  }
  q.set('limit', String(limit));
  return `?${q}`;
}

// readFilters reads the filter form.
function readFilters() {
  const checked = byId('decisions-filter').querySelector('input[name="decisions-result"]:checked');
  return {
    allow: checked ? checked.value : '',
    entrypoint: textField(byId('decisions-entrypoint')),
    principal: textField(byId('decisions-principal')),
    rule: textField(byId('decisions-rule')),
    limit: Number(byId('decisions-limit').value) || 50,
  };
}

function filtered(query) {
  return /[?&](allow|entrypoint|principal|rule)=/.test(query);
}

async function fetchDecisions(query) {
  const mine = ++seq;
  const data = await request('GET', `/v1/decisions${query}`);
  if (mine !== seq) return; // a newer query was sent meanwhile
  const list = Array.isArray(data && data.decisions) ? data.decisions : [];
  const empty = byId('decisions-empty');
  empty.textContent = filtered(query) ? 'No decision matches these filters.' : 'No decision yet.';
  fillTable(byId('decisions-table').tBodies[0], empty, list.map(decisionRow));
  byId('decisions-updated').textContent = `updated ${fmtTime(new Date().toISOString())}`;
}

// loadDecisions reloads with the filters last applied.
export function loadDecisions() {
  return fetchDecisions(applied);
}

// applyFilters loads with the form's filters; they stay applied once the
// gateway answered.
async function applyFilters() {
  const query = decisionsQuery(readFilters());
  await fetchDecisions(query);
  applied = query;
}

function violations(d) {
  const list = (Array.isArray(d.violations) ? d.violations : []).filter((v) => v && typeof v.rule === 'string');
  const shown = new Set(list.map((v) => v.rule));
  const bare = (Array.isArray(d.rule_ids) ? d.rule_ids.map(String) : []).filter((id) => !shown.has(id));
  if (!list.length && !bare.length) return el('span', { class: 'hint', text: '—' });
  return el('div', { class: 'violations' },
    list.map((v) => el('div', { class: 'violation', dataset: { rule: v.rule } },
      el('code', { class: 'rule', text: v.rule }),
      v.mode && v.mode !== 'deny' ? el('span', { class: 'badge mode-soft', text: String(v.mode) }) : null,
      el('span', { class: 'msg', text: String(v.msg || '') }))),
    bare.map((id) => el('div', { class: 'violation', dataset: { rule: id } }, el('code', { class: 'rule', text: id }))));
}

function decisionRow(d) {
  const allow = d.allow === true;
  const route = `${d.method || ''} ${d.route || ''}`.trim() || String(d.action || '');
  const id = String(d.decision_id || '');
  const tr = el('tr', { dataset: { allow: String(allow), entrypoint: String(d.entrypoint || ''), decision: id } });
  tr.append(
    el('td', { class: 'time', text: fmtTime(d.time), title: `bundle ${d.bundle_revision || '?'}` }),
    el('td', { text: String(d.entrypoint || '') }),
    el('td', {}, el('span', { class: `badge ${allow ? 'allow' : 'deny'}`, text: allow ? 'allow' : 'deny' }),
      d.error ? el('div', { class: 'hint bad', text: `engine error: ${d.error}` }) : null),
    el('td', { class: 'violations-cell' }, violations(d)),
    el('td', { text: String(d.principal || '') }),
    el('td', { text: route }),
    el('td', {}, d.sandbox_id ? el('code', { text: String(d.sandbox_id) }) : '—'),
    // user-select: all, so one click selects the whole id to copy
    el('td', {}, id ? el('code', { class: 'decision-id', text: id, title: 'decision id: click to select, then copy' }) : '—'),
  );
  return tr;
}

async function tick() {
  if (ticking || document.visibilityState !== 'visible' || !byId('decisions-auto').checked) return;
  ticking = true;
  try {
    await run(loadDecisions);
  } finally {
    ticking = false;
  }
}

// startDecisions loads now, with the filters the form shows, and
// refreshes while the view is shown.
export function startDecisions() {
  stopDecisions();
  try {
    applied = decisionsQuery(readFilters());
  } catch {
    // a filter the user left invalid: keep the last applied ones
  }
  timer = setInterval(tick, EVERY_MS);
  return loadDecisions();
}

export function stopDecisions() {
  if (timer !== null) clearInterval(timer);
  timer = null;
}

function apply() {
  return submitForm(byId('decisions-apply'), byId('decisions-error'), applyFilters);
}

// resetDecisions forgets the filters (signing out): the next session
// starts with every decision.
export function resetDecisions() {
  byId('decisions-filter').reset();
  applied = decisionsQuery({});
  seq++; // an answer still on its way is dropped
}

export function initDecisions() {
  const form = byId('decisions-filter');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    apply();
  });
  // A choice applies at once; typed text on Enter, Apply or leaving the field.
  form.addEventListener('change', () => { apply(); });
  byId('decisions-clear').addEventListener('click', () => {
    const limit = byId('decisions-limit').value;
    form.reset();
    byId('decisions-limit').value = limit;
    apply();
  });
  byId('decisions-refresh').addEventListener('click', (ev) => busy(ev.currentTarget, loadDecisions));
}
