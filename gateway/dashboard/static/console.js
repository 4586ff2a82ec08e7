// console.js: the panel of one sandbox. The exec console (argv, optional
// stdin and timeout; shows the exit code, stdout, stderr and the
// truncated/timed-out flags), the logs tail and extend. Output is
// attacker-controlled: it is shown with textContent only.

import { may } from './access.js';
import { request, path } from './api.js';
import { parseArgv } from './argv.js';
import { sandboxDetails } from './fields.js';
import {
  byId, clear, clearFormErrors, el, fmtTime, intField, notice, run, submitForm,
} from './dom.js';

let current = null; // the id of the sandbox the panel shows
let reload = async () => {}; // reloads the sandbox list after an extend

export function currentSandbox() {
  return current;
}

// LIVE are the states a sandbox runs commands in; an ended or failed one
// offers no console (nothing runs there any more).
export const LIVE = Object.freeze(['starting', 'running']);

export function isLive(state) {
  return LIVE.includes(state);
}

// clearResult removes the last exec's result: a new run, a refusal or
// another sandbox never shows under an old one.
function clearResult() {
  byId('exec-result').hidden = true;
  for (const id of ['exec-exit', 'exec-stdout', 'exec-stderr', 'exec-duration']) byId(id).textContent = '';
  byId('exec-exit').className = '';
  clear(byId('exec-flags'));
}

function resetOutputs() {
  clearResult();
  for (const id of ['logs-output', 'extend-status']) byId(id).textContent = '';
  byId('logs-output').hidden = true;
  clearFormErrors(byId('sandbox-panel'));
}

// openPanel shows the panel for a sandbox (a list entry).
export function openPanel(s) {
  if (current !== s.id) {
    resetOutputs();
    byId('exec-argv').value = '';
    byId('exec-stdin').value = '';
  }
  current = String(s.id);
  updatePanel(s);
  byId('sandbox-panel').hidden = false;
  byId('exec-argv').focus();
}

// updatePanel refreshes the panel's header from a list entry; null means
// the sandbox is no longer listed.
export function updatePanel(s) {
  byId('panel-id').textContent = current || '';
  const badge = byId('panel-state');
  const st = s ? String(s.state || 'unknown') : 'gone';
  badge.textContent = st;
  badge.className = `badge state-${st}`;
  byId('sandbox-panel').dataset.state = st;
  // What the token may do (its scopes, rule T2) and what a sandbox that
  // no longer runs can still do: exec, logs and extend only while live.
  const live = isLive(st);
  byId('exec-form').hidden = !live || !may('exec');
  byId('logs-form').hidden = !live || !may('logs');
  byId('logs-output').hidden = byId('logs-form').hidden || byId('logs-output').textContent === '';
  byId('extend-form').hidden = !live || !may('extend');
  byId('panel-destroy').hidden = !live || !may('destroy');
  byId('panel-ended').hidden = live;
  byId('panel-ended').textContent = live ? '' : `This sandbox is ${st}: nothing runs in it any more, so it has no console.`;
  // A sandbox no longer listed keeps the details last shown.
  if (s) byId('panel-details').replaceChildren(...sandboxDetails(s));
}

export function closePanel() {
  current = null;
  clear(byId('panel-details'));
  resetOutputs();
  byId('exec-argv').value = '';
  byId('exec-stdin').value = '';
  byId('sandbox-panel').hidden = true;
}

function flag(text, cls) {
  return el('span', { class: `badge ${cls}`, text });
}

function showResult(r) {
  const code = r && Object.hasOwn(r, 'exit_code') ? r.exit_code : null;
  byId('exec-exit').textContent = code === null ? 'none (the gateway gave up on the stream)' : String(code);
  byId('exec-exit').className = code === 0 ? 'good' : 'bad';
  byId('exec-stdout').textContent = typeof r.stdout === 'string' ? r.stdout : '';
  byId('exec-stderr').textContent = typeof r.stderr === 'string' ? r.stderr : '';
  const flags = byId('exec-flags');
  clear(flags);
  if (r.timed_out) flags.append(flag('timed out', 'warn'));
  if (r.stdout_truncated || (r.truncated && !r.stderr_truncated)) flags.append(flag(`stdout truncated (${r.stdout_bytes ?? '?'} bytes written)`, 'warn'));
  if (r.stderr_truncated) flags.append(flag(`stderr truncated (${r.stderr_bytes ?? '?'} bytes written)`, 'warn'));
  byId('exec-duration').textContent = Number.isFinite(r.duration_ms) ? `${r.duration_ms} ms` : '';
  byId('exec-result').hidden = false;
}

async function exec(ev) {
  ev.preventDefault();
  const id = current;
  if (!id) return;
  // Whatever this run ends in (a result, a refusal, a bad command line),
  // the previous run's result is gone: a refusal never sits above it.
  clearResult();
  await submitForm(byId('exec-run'), byId('exec-error'), async () => {
    const body = { argv: parseArgv(byId('exec-argv').value) };
    const stdin = byId('exec-stdin').value;
    if (stdin !== '') body.stdin = stdin;
    const timeout = intField(byId('exec-timeout'), 'timeout');
    if (timeout !== undefined) body.timeout_seconds = timeout;
    const r = await request('POST', path('/v1/sandboxes', id, 'exec'), { body });
    if (current === id) showResult(r || {});
  });
}

async function logs(ev) {
  ev.preventDefault();
  const id = current;
  if (!id) return;
  await submitForm(byId('logs-fetch'), byId('logs-error'), async () => {
    const q = new URLSearchParams({ stream: byId('logs-stream').value });
    const tail = intField(byId('logs-tail'), 'tail');
    if (tail !== undefined) q.set('tail_bytes', String(tail));
    const text = await request('GET', `${path('/v1/sandboxes', id, 'logs')}?${q}`, { text: true });
    if (current !== id) return;
    const out = byId('logs-output');
    out.textContent = text === '' ? '(empty)' : text;
    out.hidden = false;
  });
}

async function extend(ev) {
  ev.preventDefault();
  const id = current;
  if (!id) return;
  await submitForm(byId('extend-submit'), byId('extend-error'), async () => {
    const ttl = intField(byId('extend-ttl'), 'TTL');
    if (ttl === undefined) throw new Error('TTL is required');
    const s = await request('POST', path('/v1/sandboxes', id, 'extend'), { body: { ttl_seconds: ttl } });
    const text = `expires ${fmtTime(s && s.expires_at)}${s && s.clamped ? ' (clamped by the lifetime ceiling)' : ''}`;
    if (current === id) byId('extend-status').textContent = text;
    notice(`sandbox ${id} ${text}`);
  });
  await run(reload);
}

// initConsole wires the panel; onChange reloads the list after an extend.
export function initConsole(onChange) {
  reload = onChange;
  byId('exec-form').addEventListener('submit', exec);
  byId('logs-form').addEventListener('submit', logs);
  byId('extend-form').addEventListener('submit', extend);
  byId('panel-close').addEventListener('click', closePanel);
}
