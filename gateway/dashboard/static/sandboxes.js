// sandboxes.js: the sandboxes view. The list, filtered by the gateway
// (node, labels, principal, ended ones: the query parameters of GET
// /v1/sandboxes) and searched in the page over the rows listed; the
// create form (its session token goes to the one-time dialog and nowhere
// else) and destroy; the per-sandbox console lives in console.js. The
// list refreshes itself while shown (live.js).

import { listsOthers, may } from './access.js';
import { ApiError, request, path } from './api.js';
import {
  closePanel, currentSandbox, initConsole, isLive, openPanel, updatePanel,
} from './console.js';
import { confirmAction, showSecret } from './dialogs.js';
import { labelChips, labelPairs, mb, mhz } from './fields.js';
import {
  actionsCell, byId, el, fillTable, InputError, intField, notice, run, busy, submitForm, textField, timeCell,
} from './dom.js';
import { busyWithin, Poller } from './live.js';

// The bounds GET /v1/sandboxes enforces on its filters (gateway/sandboxes.go).
const MAX_LABEL_FILTERS = 16;
const LABEL_KEY = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/; // gateway/requests.go labelKey

let applied = ''; // the query of the filters last applied
let seq = 0; // the newest load; an older answer is dropped

// parseLabels reads "team=ci, purpose=demo" into [key, value] pairs.
export function parseLabels(text) {
  const pairs = [];
  for (const part of String(text || '').split(',')) {
    const kv = part.trim();
    if (kv === '') continue;
    const i = kv.indexOf('=');
    const k = i < 0 ? '' : kv.slice(0, i).trim();
    if (!LABEL_KEY.test(k)) throw new InputError(`label filter ${JSON.stringify(kv)} must be key=value, e.g. team=ci`);
    pairs.push([k, kv.slice(i + 1).trim()]);
  }
  if (pairs.length > MAX_LABEL_FILTERS) throw new InputError(`at most ${MAX_LABEL_FILTERS} label filters`);
  return pairs;
}

// sandboxesQuery builds the query of GET /v1/sandboxes from the filters;
// empty ones are left out. A filter the gateway would refuse throws
// InputError.
export function sandboxesQuery({
  all = false, node, labels, principal,
} = {}) {
  const q = new URLSearchParams();
  if (all) q.set('all', 'true');
  if (node !== undefined && node !== '') q.set('node', node);
  for (const [k, v] of parseLabels(labels)) q.append('label', `${k}=${v}`);
  if (principal !== undefined && principal !== '') {
    if (!/^[a-z]+:[^\s]+$/.test(principal)) throw new InputError('principal must be <role>:<subject>, e.g. agent:ci');
    q.set('principal', principal);
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

// matches says whether a row's text holds every word of a search.
export function matches(text, search) {
  const hay = String(text).toLowerCase();
  return String(search || '').toLowerCase().split(/\s+/).filter(Boolean).every((w) => hay.includes(w));
}

function readFilters() {
  return {
    all: byId('sandboxes-all').checked,
    node: textField(byId('sandboxes-node')),
    labels: textField(byId('sandboxes-label')),
    principal: listsOthers() ? textField(byId('sandboxes-principal')) : undefined,
  };
}

function filtered() {
  return applied !== '' || (byId('sandboxes-search').value.trim() !== '');
}

// search shows the listed rows holding every word typed, hides the others.
function search() {
  const words = byId('sandboxes-search').value;
  const rows = [...byId('sandboxes-table').tBodies[0].rows];
  let shown = 0;
  for (const r of rows) {
    r.hidden = !matches(r.dataset.search || r.textContent, words);
    if (!r.hidden) shown += 1;
  }
  const empty = byId('sandboxes-empty');
  empty.textContent = filtered() ? 'No sandbox matches these filters.' : 'No sandbox.';
  empty.hidden = shown > 0;
  byId('sandboxes-count').textContent = rows.length === shown ? `${rows.length} listed` : `${shown} of ${rows.length} listed`;
}

async function fetchSandboxes(query) {
  const mine = ++seq;
  const data = await request('GET', `/v1/sandboxes${query}`);
  if (mine !== seq) return false; // a newer query was sent meanwhile
  const list = Array.isArray(data && data.sandboxes) ? data.sandboxes : [];
  fillTable(byId('sandboxes-table').tBodies[0], byId('sandboxes-empty'), list.map(sandboxRow));
  byId('sandboxes-more').hidden = !(data && data.next_cursor);
  search();
  const open = currentSandbox();
  if (open) updatePanel(list.find((s) => s.id === open) || null);
  return true;
}

// loadSandboxes reloads with the filters last applied.
export function loadSandboxes() {
  return fetchSandboxes(applied);
}

// applyFilters loads with the form's filters; they stay applied once the
// gateway answered.
async function applyFilters() {
  const query = sandboxesQuery(readFilters());
  if (await fetchSandboxes(query)) applied = query;
}

// showSandboxes opens the view: the filters the form shows, a load now,
// and the refreshes while it is shown.
export async function showSandboxes() {
  byId('sandboxes-principal-field').hidden = !listsOthers();
  byId('create-form').hidden = !may('sandboxes:create');
  try {
    applied = sandboxesQuery(readFilters());
  } catch {
    // a filter the user left invalid: keep the last applied ones
  }
  poller.start();
  await loadSandboxes();
}

export function hideSandboxes() {
  poller.stop();
}

// resetSandboxes forgets the filters (signing out).
export function resetSandboxes() {
  poller.stop();
  byId('sandboxes-filter').reset();
  applied = '';
  seq++;
  byId('sandboxes-count').textContent = '';
  byId('sandboxes-more').hidden = true;
}

// The list refreshes unless the user is at work on it: a dialog is open
// or a control of the table has the focus. A refresh replaces the table's
// rows only: the filters, the create form and the console keep what the
// user typed, and the console's result.
const poller = new Poller(loadSandboxes, { skip: () => busyWithin(byId('sandboxes-table')) });

// principalName shows "role:subject" breakable only after its colon:
// never inside the subject (agent-ci), never at a hyphen.
function principalName(p) {
  const i = p.indexOf(':');
  if (i < 0) return el('span', { class: 'principal-name', text: p, title: p });
  return el('span', { class: 'principal-name', title: p },
    el('span', { text: p.slice(0, i + 1) }), el('wbr'), el('span', { text: p.slice(i + 1) }));
}

function sandboxRow(s) {
  const id = String(s.id || '');
  const st = String(s.state || 'unknown');
  const live = isLive(st);
  const tr = el('tr', { dataset: { id, state: st } });
  const node = String(s.node || '');
  // what the search looks in: the row's fields, not its buttons
  tr.dataset.search = [id, st, node, s.profile, s.network, s.image, ...labelPairs(s.labels), s.principal].filter(Boolean).join(' ');
  const stateCell = el('td', {}, el('span', { class: `badge state-${st}`, text: st }));
  if (s.end_reason) stateCell.append(el('div', { class: 'hint', text: String(s.end_reason) }));
  if (s.last_error) stateCell.append(el('div', { class: 'hint bad', text: String(s.last_error) }));
  tr.append(
    el('td', {}, el('code', { text: id })),
    stateCell,
    el('td', { class: 'node' }, node ? el('span', { class: 'node-name', text: node, title: node }) : '—'),
    el('td', { class: 'profile-network' }, el('div', { class: 'profile', text: String(s.profile || '') }), el('div', { class: 'network hint', text: String(s.network || '') })),
    el('td', { class: 'image' }, el('code', { text: String(s.image || '—') })),
    el('td', { class: 'num resources' }, el('div', { class: 'cpu', text: mhz(s.cpu_mhz) }), el('div', { class: 'memory', text: mb(s.memory_mb) })),
    el('td', { class: 'labels' }, labelChips(s.labels)),
    el('td', { class: 'principal' }, principalName(String(s.principal || ''))),
    timeCell(s.expires_at, live),
    timeCell(s.ceiling_at, live, 'ceiling'),
    // An ended or failed sandbox runs nothing: no console, no destroy.
    actionsCell(
      live && (may('exec') || may('logs')) ? el('button', { type: 'button', class: 'open', text: 'Console', on: { click: () => openPanel(s) } }) : null,
      live && may('destroy') ? el('button', { type: 'button', class: 'destroy danger', text: 'Destroy', on: { click: (ev) => destroySandbox(id, ev.currentTarget) } }) : null),
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

function apply() {
  return submitForm(byId('sandboxes-apply'), byId('sandboxes-filter-error'), applyFilters);
}

export function initSandboxes() {
  initConsole(loadSandboxes);
  byId('create-form').addEventListener('submit', create);
  byId('sandboxes-refresh').addEventListener('click', (ev) => busy(ev.currentTarget, loadSandboxes));
  const form = byId('sandboxes-filter');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    apply();
  });
  // A choice applies at once; typed filters on Enter, Apply or leaving the
  // field. The search is the page's own: it narrows the rows as typed.
  form.addEventListener('change', (ev) => { if (ev.target.id !== 'sandboxes-search') apply(); });
  byId('sandboxes-search').addEventListener('input', search);
  byId('sandboxes-clear').addEventListener('click', () => {
    form.reset();
    apply();
  });
  byId('panel-destroy').addEventListener('click', (ev) => {
    const id = currentSandbox();
    if (id) destroySandbox(id, ev.currentTarget);
  });
}
