// hosts.js: the hosts view. Nomad client nodes with their enrollment,
// the operator's state, Nomad's status, usage and budget bars; enroll,
// unenroll (optionally reclaiming live sandboxes) and state changes. The
// list refreshes itself while shown (live.js), never under an open dialog
// or a state being chosen.

import { request, path } from './api.js';
import { budgetBars, usageBars } from './bars.js';
import { confirmAction } from './dialogs.js';
import {
  actionsCell, byId, clear, clearFormError, el, fillTable, intField, notice, run, busy, showFormError, state,
} from './dom.js';
import { busyWithin, Poller } from './live.js';

const STATES = ['active', 'frozen', 'reserved', 'draining'];
let editing = null; // the host the enroll dialog is for

export async function loadHosts() {
  const data = await request('GET', '/v1/hosts');
  const hosts = Array.isArray(data && data.hosts) ? data.hosts : [];
  fillTable(byId('hosts-table').tBodies[0], byId('hosts-empty'), hosts.map(hostRow));
  const names = byId('node-names');
  clear(names);
  for (const h of hosts) if (h.enrollment && h.enrollment !== 'none') names.append(el('option', { value: String(h.name) }));
}

const poller = new Poller(loadHosts, { skip: () => busyWithin(byId('hosts-table')) });

// showHosts loads the hosts now and refreshes them while the view is shown.
export async function showHosts() {
  poller.start();
  await loadHosts();
}

export function hideHosts() {
  poller.stop();
}

function enrolled(h) {
  return typeof h.enrollment === 'string' && h.enrollment !== 'none' && h.enrollment !== '';
}

function nomadText(n) {
  if (!n || typeof n !== 'object') return 'unknown';
  return `${n.status || '?'} · ${n.eligibility || '?'}${n.drain ? ' · draining' : ''}`;
}

// P2 is why a control-plane node offers no enrollment.
const P2_TEXT = 'sandgate never places sandboxes on a Nomad server node (rule P2)';

// controlPlane says whether the gateway found a Nomad server on the host
// (its co-location verdict): the policy refuses to enroll it (P2).
function controlPlane(h) {
  return h.control_plane === true;
}

function hostRow(h) {
  const name = String(h.name || '');
  const cp = controlPlane(h);
  const tr = el('tr', {
    dataset: {
      node: name, enrollment: String(h.enrollment || 'none'), state: String(h.state || ''), controlPlane: String(cp),
    },
  });
  tr.append(
    el('td', { class: 'node' }, el('strong', { class: 'node-name', text: name, title: name }),
      cp ? el('div', {}, el('span', { class: 'badge control-plane', text: 'control plane', title: P2_TEXT })) : null,
      el('div', { class: 'hint', text: String(h.datacenter || '') })),
    el('td', {}, el('span', { class: `badge enroll-${enrolled(h) ? 'yes' : 'no'}`, text: String(h.enrollment || 'none') })),
    el('td', {}, enrolled(h) ? stateSelect(h) : el('span', { class: 'hint', text: '—' })),
    el('td', { class: h.nomad && h.nomad.status === 'ready' ? 'nomad' : 'nomad bad' },
      el('div', { text: nomadText(h.nomad) }),
      el('div', { class: 'hint arch', text: `${h.os || '?'}/${h.architecture || '?'}` })),
    el('td', { class: 'bars' }, usageBars(h.usage)),
    el('td', { class: 'bars' }, enrolled(h) ? budgetBars(h.budget) : el('span', { class: 'hint', text: 'not enrolled' })),
    el('td', { class: 'num', text: String(h.live_sandboxes ?? 0) }),
    // A control plane offers no Enroll: the policy always refuses it. One
    // enrolled before that decision existed can still be unenrolled.
    actionsCell(
      cp ? el('span', { class: 'hint cp-note', text: `Not enrollable: ${P2_TEXT}.` })
        : el('button', { type: 'button', class: 'enroll', text: enrolled(h) ? 'Re-enroll' : 'Enroll', on: { click: () => openEnroll(h) } }),
      enrolled(h) ? el('button', { type: 'button', class: 'unenroll danger', text: 'Unenroll', on: { click: (ev) => unenroll(h, ev.currentTarget) } }) : null),
  );
  return tr;
}

function stateSelect(h) {
  const sel = el('select', { class: 'host-state', aria: { label: `state of ${h.name}` } },
    STATES.map((s) => el('option', { value: s, text: s, selected: s === h.state })));
  sel.addEventListener('change', () => changeState(h, sel));
  return sel;
}

async function changeState(h, sel) {
  const next = sel.value;
  if (next === 'draining') {
    const live = Number(h.live_sandboxes) || 0;
    const { ok } = await confirmAction(`Drain ${h.name}? Its ${live} live sandbox(es) are destroyed first (rule R2) and no new one is placed there.`, { confirmLabel: 'Drain' });
    if (!ok) {
      sel.value = h.state;
      return;
    }
  }
  await busy(sel, async () => {
    const res = await request('POST', path('/v1/hosts', h.name, 'state'), { body: { state: next } });
    notice(`${h.name} is now ${next}${reclaimedText(res)}`);
  });
  await run(loadHosts);
}

function reclaimedText(res) {
  const ids = res && Array.isArray(res.reclaimed) ? res.reclaimed : [];
  return ids.length ? `; reclaimed ${ids.join(', ')}` : '';
}

async function unenroll(h, button) {
  const { ok, checked } = await confirmAction(`Unenroll ${h.name}? No sandbox can be placed there afterwards.`, {
    option: `reclaim live sandboxes (destroy its ${Number(h.live_sandboxes) || 0} live sandbox(es) first)`,
    confirmLabel: 'Unenroll',
  });
  if (!ok) return;
  await busy(button, async () => {
    const url = path('/v1/hosts', h.name, 'enrollment') + (checked ? '?reclaim=true' : '');
    const res = await request('DELETE', url);
    notice(`${h.name} is unenrolled${reclaimedText(res)}`);
  });
  await run(loadHosts);
}

function openEnroll(h) {
  editing = h;
  const limits = (h.budget && h.budget.limits) || {};
  byId('enroll-node').textContent = String(h.name);
  byId('enroll-egress').checked = h.enrollment === 'sandbox+egress';
  const put = (id, v) => { byId(id).value = enrolled(h) && Number.isFinite(v) ? String(v) : ''; };
  put('enroll-max', limits.max_sandboxes);
  put('enroll-cpu', limits.cpu_mhz);
  put('enroll-memory', limits.memory_mb);
  clearFormError(byId('enroll-error'));
  byId('enroll-dialog').showModal();
}

async function submitEnroll(ev) {
  ev.preventDefault();
  const h = editing;
  const errBox = byId('enroll-error');
  if (!h || state.locked) return;
  try {
    const budget = {};
    const max = intField(byId('enroll-max'), 'max sandboxes');
    const cpu = intField(byId('enroll-cpu'), 'CPU budget');
    const mem = intField(byId('enroll-memory'), 'memory budget');
    if (max !== undefined) budget.max_sandboxes = max;
    if (cpu !== undefined) budget.cpu_mhz = cpu;
    if (mem !== undefined) budget.memory_mb = mem;
    const body = { egress: byId('enroll-egress').checked };
    if (Object.keys(budget).length) body.budget = budget;
    await request('PUT', path('/v1/hosts', h.name, 'enrollment'), { body });
    clearFormError(errBox);
    byId('enroll-dialog').close('ok');
    notice(`${h.name} is enrolled${body.egress ? ' for egress' : ''}`);
    await run(loadHosts);
  } catch (err) {
    showFormError(errBox, err);
  }
}

export function initHosts() {
  byId('hosts-refresh').addEventListener('click', (ev) => busy(ev.currentTarget, loadHosts));
  byId('enroll-form').addEventListener('submit', submitEnroll);
  byId('enroll-cancel').addEventListener('click', () => byId('enroll-dialog').close('cancel'));
  byId('enroll-dialog').addEventListener('close', () => { editing = null; });
}
