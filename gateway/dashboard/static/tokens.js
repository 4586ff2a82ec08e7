// tokens.js: the tokens view. Operator and agent tokens: the list (never
// a secret), minting (the secret goes to the one-time dialog only) and
// revocation.

import { request, path } from './api.js';
import { confirmAction, showSecret } from './dialogs.js';
import {
  actionsCell, byId, el, fillTable, intField, notice, run, busy, submitForm, textField, timeCell,
} from './dom.js';

export async function loadTokens() {
  const data = await request('GET', '/v1/tokens');
  const list = Array.isArray(data && data.tokens) ? data.tokens : [];
  fillTable(byId('tokens-table').tBodies[0], byId('tokens-empty'), list.map(tokenRow));
}

function tokenRow(t) {
  const id = String(t.id || '');
  const revoked = typeof t.revoked_at === 'string' && t.revoked_at !== '';
  const tr = el('tr', { dataset: { id, revoked: String(revoked) } });
  const quota = t.quota && Number.isFinite(t.quota.max_live_sandboxes) ? ` (≤ ${t.quota.max_live_sandboxes} live)` : '';
  tr.append(
    el('td', {}, el('code', { text: id.length > 12 ? `${id.slice(0, 12)}…` : id, title: id })),
    el('td', {}, el('span', { class: `badge role-${String(t.role || '')}`, text: String(t.role || '') })),
    el('td', { text: `${t.subject || ''}${quota}` }),
    el('td', { text: String(t.label || '') }),
    timeCell(t.created_at, false),
    timeCell(t.expires_at, !revoked),
    timeCell(t.last_used, false),
    revoked ? timeCell(t.revoked_at, false) : el('td', { text: 'no' }),
    actionsCell(revoked ? null
      : el('button', { type: 'button', class: 'revoke danger', text: 'Revoke', on: { click: (ev) => revoke(t, ev.currentTarget) } })),
  );
  if (revoked) tr.classList.add('muted');
  return tr;
}

async function revoke(t, button) {
  const { ok } = await confirmAction(`Revoke the ${t.role} token ${t.id} (${t.subject})? It is refused from the next request on.`, { confirmLabel: 'Revoke' });
  if (!ok) return;
  await busy(button, async () => {
    await request('DELETE', path('/v1/tokens', t.id));
    notice(`token ${t.id} revoked`);
  });
  await run(loadTokens);
}

async function mint(ev) {
  ev.preventDefault();
  await submitForm(byId('mint-submit'), byId('mint-error'), async () => {
    const role = byId('mint-role').value;
    const ttl = intField(byId('mint-ttl'), 'TTL');
    if (ttl === undefined) throw new Error('TTL is required');
    const body = { role, ttl_seconds: ttl };
    const subject = textField(byId('mint-subject'));
    const label = textField(byId('mint-label'));
    const quota = role === 'agent' ? intField(byId('mint-quota'), 'max live sandboxes') : undefined;
    if (subject !== undefined) body.subject = subject;
    if (label !== undefined) body.label = label;
    if (quota !== undefined) body.quota = { max_live_sandboxes: quota };
    const t = await request('POST', '/v1/tokens', { body });
    const secret = t && typeof t.token === 'string' ? t.token : '';
    if (t) delete t.token; // the dialog holds the only copy
    if (secret) showSecret(`${t.role} token for ${t.subject}`, secret);
    notice(`${t && t.role} token ${t && t.id} minted`);
  });
  await run(loadTokens);
}

function syncQuota() {
  const agent = byId('mint-role').value === 'agent';
  const q = byId('mint-quota');
  q.disabled = !agent || document.body.classList.contains('locked');
  if (!agent) q.value = '';
}

export function initTokens() {
  byId('mint-form').addEventListener('submit', mint);
  byId('mint-role').addEventListener('change', syncQuota);
  byId('tokens-refresh').addEventListener('click', (ev) => busy(ev.currentTarget, loadTokens));
  syncQuota();
}
