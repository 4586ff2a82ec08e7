// policy.js: the policy in force (revision, digest, signer, every rule
// with its severity and enforcement mode) and a replay of a candidate
// bundle against this gateway's decision log (POST /v1/policy/replay).

import { path, request } from './api.js';
import {
  byId, el, fillTable, fmtTime, busy, intField, submitForm, textField, InputError,
} from './dom.js';

export async function loadPolicy() {
  const p = await request('GET', '/v1/policy');
  const signed = p.signed === true ? `signed by ${p.signer || '?'}` : 'unsigned';
  byId('policy-summary').textContent = `revision ${p.revision || '?'} · ${signed} · loaded ${fmtTime(p.loaded_at)} · digest ${p.digest || '?'} (${p.digest_algorithm || '?'})`;
  const rules = Array.isArray(p.rules) ? p.rules : [];
  fillTable(byId('policy-table').tBodies[0], byId('policy-empty'), rules.map(ruleRow));
}

function ruleRow(r) {
  const mode = String(r.mode || 'deny');
  const tr = el('tr', { dataset: { mode, rule: String(r.id || '') } });
  tr.append(
    el('td', {}, el('code', { class: 'rule', text: String(r.id || '') })),
    el('td', { text: String(r.entrypoint || '') }),
    el('td', { text: String(r.severity || '') }),
    el('td', {}, el('span', { class: `badge mode-${mode === 'deny' ? 'deny' : 'soft'}`, text: mode })),
    el('td', { text: String(r.title || ''), title: String(r.description || '') || undefined }),
    el('td', {}, el('code', { class: 'hint', text: String(r.location || '') })),
  );
  return tr;
}

// replayQuery builds the query of a replay from the form.
export function replayQuery(since, limit) {
  const q = new URLSearchParams();
  if (since !== undefined) {
    if (Number.isNaN(new Date(since).getTime()) || !/^\d{4}-\d{2}-\d{2}T/.test(since)) {
      throw new InputError('since must be an RFC 3339 time, e.g. 2026-12-01T09:00:00Z');
    }
    q.set('since', since);
  }
  if (limit !== undefined) q.set('limit', String(limit));
  const s = q.toString();
  return s ? `?${s}` : '';
}

async function replayCandidate() {
  const file = byId('replay-file').files[0];
  if (!file) throw new InputError('choose a candidate bundle (sandgate policy build -o bundle.tar.gz)');
  const query = replayQuery(textField(byId('replay-since')), intField(byId('replay-limit'), 'limit'));
  const report = await request('POST', `${path('v1', 'policy', 'replay')}${query}`, { raw: file, contentType: 'application/gzip' });
  showReplay(report);
}

function showReplay(rep) {
  const flips = rep && typeof rep.flips === 'object' && rep.flips ? rep.flips : {};
  const skipped = rep && typeof rep.skipped === 'object' && rep.skipped ? Object.values(rep.skipped).reduce((a, n) => a + Number(n || 0), 0) : 0;
  const loosens = Number(flips.deny_to_allow || 0) > 0;
  const summary = byId('replay-summary');
  summary.textContent = `candidate ${rep.candidate_revision || '?'}: replayed ${Number(rep.replayed || 0)} decisions, `
    + `${Number(rep.unchanged || 0)} unchanged, ${skipped} skipped${rep.truncated ? ' (stopped at the limit)' : ''}. `
    + (loosens ? `${flips.deny_to_allow} logged refusals would be allowed: a reviewer's sign-off is due.` : 'No refusal would be allowed.');
  summary.className = loosens ? 'bad' : 'hint';
  summary.hidden = false;
  const groups = Array.isArray(rep.groups) ? rep.groups : [];
  fillTable(byId('replay-table').tBodies[0], byId('replay-empty'), groups.map((g) => {
    const tr = el('tr', { dataset: { kind: String(g.kind || ''), rule: String(g.rule || '') } });
    tr.append(
      el('td', { text: String(g.kind || '').replaceAll('_', ' ') }),
      el('td', {}, el('code', { class: 'rule', text: String(g.rule || '') })),
      el('td', { text: String(Number(g.count || 0)) }),
      el('td', {}, ...(Array.isArray(g.example_decision_ids) ? g.example_decision_ids : []).map((id) => el('code', { text: `${String(id)} ` }))),
    );
    return tr;
  }));
}

export function initPolicy() {
  byId('policy-refresh').addEventListener('click', (ev) => busy(ev.currentTarget, loadPolicy));
  byId('replay-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    submitForm(byId('replay-submit'), byId('replay-error'), replayCandidate);
  });
}
