// app.js: the dashboard's entry point. Feature detection through
// /v1/capabilities, sign-in and sign-out, and switching views.
//
// Sign-in takes the token from a password field, clears the field and
// keeps the token in api.js's memory only. Signing out, a 401, or a
// reload forgets it. The views offered are those the token may use
// (access.js: the scopes its claims carry, then what the gateway
// answers): an operator sees every view and lands on the overview, an
// agent its sandboxes, a reviewer the decisions and the policy.

import {
  allowedViews, claimsOf, forgetClaims, setClaims,
} from './access.js';
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
  byId, clear, clearError, clearFormErrors, describe, disableAll, notice, showError, state,
} from './dom.js';
import { hideHosts, initHosts, showHosts } from './hosts.js';
import { hideOverview, resetOverview, showOverview } from './overview.js';
import { initPolicy, loadPolicy } from './policy.js';
import {
  hideSandboxes, initSandboxes, resetSandboxes, showSandboxes,
} from './sandboxes.js';
import { initTokens, loadTokens } from './tokens.js';

const VIEWS = {
  overview: { show: showOverview, hide: hideOverview },
  hosts: { show: showHosts, hide: hideHosts },
  sandboxes: { show: showSandboxes, hide: hideSandboxes },
  tokens: { show: loadTokens },
  decisions: { show: startDecisions, hide: stopDecisions },
  policy: { show: loadPolicy },
};
let current = null;
let allowed = []; // the views the signed-in token may use, in order

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

// navigate shows one view; any open secret is cleared first. A view the
// gateway refuses this token (403: the policy grants less than the
// token's scopes say) is cut from the navigation, never left showing a
// refusal.
async function navigate(name) {
  if (!VIEWS[name] || !signedIn() || !allowed.includes(name)) return;
  closeAllDialogs();
  hideViews();
  current = name;
  byId(`view-${name}`).hidden = false;
  byId('nav').querySelector(`button[data-view="${name}"]`).setAttribute('aria-current', 'page');
  try {
    await VIEWS[name].show();
  } catch (err) {
    if (err instanceof ApiError && err.status === 403 && current === name) {
      await cutView(name, err);
      return;
    }
    if (!(err instanceof ApiError && err.status === 401)) showError(err);
  }
}

async function cutView(name, err) {
  allowed = allowed.filter((v) => v !== name);
  byId('nav').querySelector(`button[data-view="${name}"]`).hidden = true;
  const why = err.ruleIds.length ? `rule ${err.ruleIds.join(', ')}` : err.code || 'HTTP 403';
  notice(`The gateway refuses this token the ${name} view (${why}): it is left out.`);
  if (allowed.length) await navigate(allowed[0]);
  else signOut('signed out: the gateway refuses this token every view of the dashboard');
}

// wipe removes every piece of API data from the page.
function wipe() {
  for (const t of document.querySelectorAll('main table')) clear(t.tBodies[0]);
  byId('replay-summary').hidden = true;
  byId('policy-summary').textContent = '';
  clearFormErrors();
  resetDecisions();
  resetSandboxes();
  resetOverview();
  clear(byId('node-names'));
  closePanel();
  notice('');
}

// PROOFS are the routes that prove a token at sign-in, by the scope they
// need: the first the token holds is asked before anything is shown. One
// the gateway refuses (403) takes that scope's views out.
const PROOFS = [
  ['sandboxes:list', '/v1/sandboxes?limit=1'],
  ['hosts:read', '/v1/hosts'],
  ['policy:read', '/v1/policy'],
  ['tokens:read', '/v1/tokens'],
];

// prove asks the gateway until a route the token's scopes promise is
// answered, and returns the claims without the scopes it refused. A 401
// or another failure is thrown.
async function prove(claims) {
  let scopes = [...claims.scopes];
  for (const [scope, route] of PROOFS) {
    if (!scopes.includes(scope)) continue;
    try {
      await request('GET', route);
      break;
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 403)) throw err;
      scopes = scopes.filter((s) => s !== scope);
    }
  }
  return Object.freeze({ ...claims, scopes: Object.freeze(scopes) });
}

function signOut(message) {
  forgetToken();
  forgetClaims();
  allowed = [];
  closeAllDialogs();
  hideViews();
  wipe();
  byId('nav').hidden = true;
  byId('sign-out').hidden = true;
  byId('signed-in-as').textContent = '';
  byId('signed-in-as').hidden = true;
  byId('sign-in').hidden = false;
  byId('token-input').value = '';
  byId('sign-in-message').textContent = message || '';
  if (!state.locked) byId('token-input').focus();
}

function refuse(message) {
  if (signedIn()) forgetToken();
  byId('sign-in-message').textContent = `sign-in refused: ${message}`;
}

async function signIn(ev) {
  ev.preventDefault();
  const input = byId('token-input');
  const tok = input.value.trim();
  input.value = ''; // the token never stays in the DOM
  if (state.locked || tok === '') return;
  clearError();
  const claims = claimsOf(tok);
  if (!claims) {
    refuse('this is not a sandgate token (a signed JWT naming its role and scopes)');
    return;
  }
  if (!allowedViews(claims).length) {
    refuse(`a ${claims.role} token opens no view of the dashboard (it holds none of the scopes the views read with)`);
    return;
  }
  setToken(tok);
  let proven;
  try {
    proven = await prove(claims); // proves the token before showing anything
  } catch (err) {
    refuse(describe(err));
    return;
  }
  allowed = allowedViews(proven);
  if (!allowed.length) {
    refuse('the gateway refuses this token every view of the dashboard');
    return;
  }
  setClaims(proven);
  byId('sign-in-message').textContent = '';
  byId('sign-in').hidden = true;
  for (const b of byId('nav').querySelectorAll('button')) b.hidden = !allowed.includes(b.dataset.view);
  byId('nav').hidden = false;
  byId('sign-out').hidden = false;
  byId('signed-in-as').textContent = `${proven.role}:${proven.sub}`;
  byId('signed-in-as').hidden = false;
  await navigate(allowed[0]);
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
  // the overview's links to the views it sums up
  for (const b of document.querySelectorAll('button[data-goto]')) {
    b.addEventListener('click', () => { navigate(b.dataset.goto).catch(showError); });
  }
  detect().catch(showError).finally(() => document.body.classList.add('ready'));
}

init();
