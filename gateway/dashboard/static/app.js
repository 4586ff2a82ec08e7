// app.js: the dashboard's entry point. Feature detection through
// /v1/capabilities, sign-in and sign-out, and switching views.
//
// Sign-in takes the operator token from a password field, clears the field
// and keeps the token in api.js's memory only. Signing out, a 401, or a
// reload forgets it.

import {
  ApiError, capabilities, forgetToken, request, setToken, setUnauthorizedHandler, signedIn,
} from './api.js';
import { NEEDED, missingCapabilities } from './caps.js';
import { closeAllDialogs, initDialogs } from './dialogs.js';
import { closePanel } from './console.js';
import {
  initDecisions, resetDecisions, startDecisions, stopDecisions,
} from './decisions.js';
import {
  byId, clear, clearError, clearFormErrors, describe, disableAll, notice, run, showError, state,
} from './dom.js';
import { initHosts, loadHosts } from './hosts.js';
import { initPolicy, loadPolicy } from './policy.js';
import { initSandboxes, loadSandboxes } from './sandboxes.js';
import { initTokens, loadTokens } from './tokens.js';

const VIEWS = {
  hosts: { show: loadHosts },
  sandboxes: { show: loadSandboxes },
  tokens: { show: loadTokens },
  decisions: { show: startDecisions, hide: stopDecisions },
  policy: { show: loadPolicy },
};
let current = null;

function requireUpgrade(missing, why) {
  const banner = byId('upgrade-banner');
  banner.textContent = `gateway upgrade required: this dashboard needs ${missing.join(', ')}${why ? ` (${why})` : ''}. Every control is disabled.`;
  banner.hidden = false;
  disableAll();
}

async function detect() {
  let caps;
  try {
    caps = await capabilities();
  } catch (err) {
    requireUpgrade([...NEEDED], `GET /v1/capabilities failed: ${describe(err)}`);
    byId('gateway-info').textContent = 'gateway: unknown';
    return;
  }
  const info = [`gateway ${caps.version || '?'}`, `bundle ${caps.bundle_revision || '?'}`];
  byId('gateway-info').textContent = info.join(' · ');
  if (caps.simulated === true) byId('simulated-banner').hidden = false;
  const missing = missingCapabilities(caps);
  if (missing.length) {
    requireUpgrade(missing, 'missing from GET /v1/capabilities');
    return;
  }
  // Sign-in starts disabled: it opens only once the gateway is known to fit.
  byId('token-input').disabled = false;
  byId('sign-in-button').disabled = false;
  byId('token-input').focus();
}

function hideViews() {
  if (current && VIEWS[current].hide) VIEWS[current].hide();
  current = null;
  for (const name of Object.keys(VIEWS)) byId(`view-${name}`).hidden = true;
  for (const b of byId('nav').querySelectorAll('button')) b.removeAttribute('aria-current');
}

// navigate shows one view; any open secret is cleared first.
async function navigate(name) {
  if (!VIEWS[name] || !signedIn()) return;
  closeAllDialogs();
  hideViews();
  current = name;
  byId(`view-${name}`).hidden = false;
  byId('nav').querySelector(`button[data-view="${name}"]`).setAttribute('aria-current', 'page');
  await run(VIEWS[name].show);
}

// wipe removes every piece of API data from the page.
function wipe() {
  for (const name of Object.keys(VIEWS)) clear(byId(`${name}-table`).tBodies[0]);
  clear(byId('replay-table').tBodies[0]);
  byId('replay-summary').hidden = true;
  byId('policy-summary').textContent = '';
  clearFormErrors();
  resetDecisions();
  clear(byId('node-names'));
  closePanel();
  notice('');
}

// The views a reviewer token may open.
const REVIEWER_VIEWS = ['policy', 'decisions'];

// isReviewer proves the token: an operator's lists the sandboxes; a
// reviewer's is refused that (403) and reads the policy instead. Any
// other refusal is thrown.
async function isReviewer() {
  try {
    await request('GET', '/v1/sandboxes');
    return false;
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 403)) throw err;
    await request('GET', '/v1/policy');
    return true;
  }
}

function signOut(message) {
  forgetToken();
  closeAllDialogs();
  hideViews();
  wipe();
  byId('nav').hidden = true;
  byId('sign-out').hidden = true;
  byId('sign-in').hidden = false;
  byId('token-input').value = '';
  byId('sign-in-message').textContent = message || '';
  if (!state.locked) byId('token-input').focus();
}

async function signIn(ev) {
  ev.preventDefault();
  const input = byId('token-input');
  const tok = input.value.trim();
  input.value = ''; // the token never stays in the DOM
  if (state.locked || tok === '') return;
  clearError();
  setToken(tok);
  let reviewer = false;
  try {
    reviewer = await isReviewer(); // proves the token before showing anything
  } catch (err) {
    if (signedIn()) forgetToken();
    byId('sign-in-message').textContent = `sign-in refused: ${describe(err)}`;
    return;
  }
  byId('sign-in-message').textContent = '';
  byId('sign-in').hidden = true;
  // A reviewer sees what it may read: the policy and the decisions.
  for (const b of byId('nav').querySelectorAll('button')) {
    b.hidden = reviewer && !REVIEWER_VIEWS.includes(b.dataset.view);
  }
  byId('nav').hidden = false;
  byId('sign-out').hidden = false;
  await navigate(reviewer ? 'policy' : 'sandboxes');
}

function init() {
  window.addEventListener('unhandledrejection', (ev) => {
    ev.preventDefault();
    showError(ev.reason);
  });
  initDialogs();
  initHosts();
  initSandboxes();
  initTokens();
  initDecisions();
  initPolicy();
  setUnauthorizedHandler((err) => signOut(`signed out: the gateway refused the token (${describe(err)})`));
  byId('sign-in-form').addEventListener('submit', (ev) => { signIn(ev).catch(showError); });
  byId('sign-out').addEventListener('click', () => signOut('signed out'));
  byId('error-dismiss').addEventListener('click', clearError);
  for (const b of byId('nav').querySelectorAll('button')) {
    b.addEventListener('click', () => { navigate(b.dataset.view).catch(showError); });
  }
  detect().catch(showError).finally(() => document.body.classList.add('ready'));
}

init();
