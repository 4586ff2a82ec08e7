// sandboxes.js: the sandboxes view. The list, the create form (its session
// token goes to the one-time dialog and nowhere else) and destroy; the
// per-sandbox console lives in console.js.

import { ApiError, request, path } from './api.js';
import {
  closePanel, currentSandbox, initConsole, openPanel, updatePanel,
} from './console.js';
import { confirmAction, showSecret } from './dialogs.js';
import { labelChips, mb, mhz } from './fields.js';
import {
  actionsCell, byId, el, fillTable, intField, notice, run, busy, submitForm, textField, timeCell,
} from './dom.js';

export async function loadSandboxes() {
  const all = byId('sandboxes-all').checked;
  const data = await request('GET', `/v1/sandboxes${all ? '?all=true' : ''}`);
  const list = Array.isArray(data && data.sandboxes) ? data.sandboxes : [];
  fillTable(byId('sandboxes-table').tBodies[0], byId('sandboxes-empty'), list.map(sandboxRow));
  const open = currentSandbox();
  if (open) updatePanel(list.find((s) => s.id === open) || null);
}

function sandboxRow(s) {
  const id = String(s.id || '');
  const st = String(s.state || 'unknown');
  const live = st === 'running' || st === 'starting';
  const tr = el('tr', { dataset: { id, state: st } });
  const stateCell = el('td', {}, el('span', { class: `badge state-${st}`, text: st }));
  if (s.end_reason) stateCell.append(el('div', { class: 'hint', text: String(s.end_reason) }));
  if (s.last_error) stateCell.append(el('div', { class: 'hint bad', text: String(s.last_error) }));
  tr.append(
    el('td', {}, el('code', { text: id })),
    stateCell,
    el('td', { text: String(s.node || '—') }),
    el('td', { text: String(s.profile || '') }),
    el('td', { text: String(s.network || '') }),
    el('td', { class: 'image' }, el('code', { text: String(s.image || '—') })),
    el('td', { class: 'num resources' }, el('div', { class: 'cpu', text: mhz(s.cpu_mhz) }), el('div', { class: 'memory', text: mb(s.memory_mb) })),
    el('td', { class: 'labels' }, labelChips(s.labels)),
    el('td', { text: String(s.principal || '') }),
    timeCell(s.expires_at, live),
    timeCell(s.ceiling_at, live, 'ceiling'),
    actionsCell(
      el('button', { type: 'button', class: 'open', text: 'Console', on: { click: () => openPanel(s) } }),
      live ? el('button', { type: 'button', class: 'destroy danger', text: 'Destroy', on: { click: (ev) => destroySandbox(id, ev.currentTarget) } }) : null),
  );
  return tr;
}

// destroySandbox asks, then destroys (DELETE is idempotent) and reloads.
export async function destroySandbox(id, button) {
  const { ok } = await confirmAction(`Destroy sandbox ${id}? Its job is stopped and purged and its session token revoked.`, { confirmLabel: 'Destroy' });
  if (!ok) return;
  await busy(button, async () => {
    await request('DELETE', path('/v1/sandboxes', id));
    notice(`sandbox ${id} destroyed`);
  });
  if (currentSandbox() === id) closePanel();
  await run(loadSandboxes);
}

function createBody() {
  const body = {};
  const set = (k, v) => { if (v !== undefined) body[k] = v; };
  set('profile', textField(byId('create-profile')));
  set('network', textField(byId('create-network')));
  set('ttl_seconds', intField(byId('create-ttl'), 'TTL'));
  set('node', textField(byId('create-node')));
  set('image', textField(byId('create-image')));
  set('cpu_mhz', intField(byId('create-cpu'), 'CPU'));
  set('memory_mb', intField(byId('create-memory'), 'memory'));
  return body;
}

async function create(ev) {
  ev.preventDefault();
  const status = byId('create-status');
  await submitForm(byId('create-submit'), byId('create-error'), async () => {
    const body = createBody();
    status.textContent = 'creating… (waits until the allocation runs)';
    let sb;
    try {
      sb = await request('POST', '/v1/sandboxes', { body });
    } finally {
      status.textContent = '';
    }
    const secret = sb && typeof sb.token === 'string' ? sb.token : '';
    if (sb) delete sb.token; // the dialog holds the only copy
    if (secret) showSecret(`Session token for sandbox ${sb.id}`, secret);
    if (sb && sb.state === 'failed') {
      throw new ApiError(0, { code: 'placement_failed', detail: `sandbox ${sb.id} failed: ${sb.last_error || 'no reason given'}` });
    }
    if (sb) notice(`sandbox ${sb.id} is ${sb.state}`);
  });
  await run(loadSandboxes);
}

export function initSandboxes() {
  initConsole(loadSandboxes);
  byId('create-form').addEventListener('submit', create);
  byId('sandboxes-refresh').addEventListener('click', (ev) => busy(ev.currentTarget, loadSandboxes));
  byId('sandboxes-all').addEventListener('change', () => run(loadSandboxes));
  byId('panel-destroy').addEventListener('click', (ev) => {
    const id = currentSandbox();
    if (id) destroySandbox(id, ev.currentTarget);
  });
}
