// api.js: the REST client of the dashboard.
//
// The operator token lives in this module's memory only: never in
// localStorage, sessionStorage, a cookie, the URL or the DOM. Every call
// sends it as "Authorization: Bearer"; a 401 forgets it and hands control
// to the unauthorized handler (the sign-in screen).

let token = null;
let onUnauthorized = () => {};

// ApiError is a refused or failed call: the problem+json members the
// dashboard shows (code, title, detail, rule ids, decision id), and the
// answer's Retry-After in seconds (0 when absent).
export class ApiError extends Error {
  constructor(status, problem, retryAfter) {
    const p = problem && typeof problem === 'object' ? problem : {};
    super(str(p.detail) || str(p.title) || `HTTP ${status}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = str(p.code);
    this.title = str(p.title);
    this.field = str(p.field);
    this.ruleIds = Array.isArray(p.rule_ids) ? p.rule_ids.map(String) : [];
    this.decisionId = str(p.decision_id);
    this.requestId = str(p.request_id);
    this.retryAfter = retrySeconds(retryAfter);
  }
}

// retrySeconds reads a Retry-After header's delay in seconds (an HTTP
// date is not used by the gateway); anything else is 0.
export function retrySeconds(v) {
  const s = typeof v === 'string' ? v.trim() : '';
  return /^[0-9]{1,6}$/.test(s) ? Number(s) : 0;
}

function str(v) {
  return typeof v === 'string' ? v : '';
}

export function setToken(t) {
  token = t;
}

export function forgetToken() {
  token = null;
}

export function signedIn() {
  return token !== null;
}

export function setUnauthorizedHandler(fn) {
  onUnauthorized = fn;
}

// path joins fixed segments and escaped values: path('/v1/hosts', node, 'state').
export function path(...parts) {
  return parts.map((p, i) => (i === 0 ? p : encodeURIComponent(String(p)))).join('/');
}

async function readProblem(resp) {
  const text = await resp.text().catch(() => '');
  try {
    const p = JSON.parse(text);
    if (p && typeof p === 'object') return p;
  } catch {
    // not JSON: fall through
  }
  return { detail: text.slice(0, 300) || resp.statusText || `HTTP ${resp.status}` };
}

async function send(url, init) {
  try {
    return await fetch(url, {
      cache: 'no-store', credentials: 'omit', redirect: 'error', referrerPolicy: 'no-referrer', ...init,
    });
  } catch (e) {
    throw new ApiError(0, { code: 'network_error', detail: `the gateway did not answer: ${e.message}` });
  }
}

// capabilities reads GET /v1/capabilities (public: no token).
export async function capabilities() {
  const resp = await send('/v1/capabilities', { headers: { Accept: 'application/json' } });
  if (!resp.ok) throw new ApiError(resp.status, await readProblem(resp));
  try {
    return await resp.json();
  } catch {
    throw new ApiError(resp.status, { code: 'bad_response', detail: '/v1/capabilities is not JSON' });
  }
}

// request calls the API with the operator token. opts.body is sent as
// JSON; opts.text returns the body as text. 204 returns null.
export async function request(method, url, opts = {}) {
  const used = token;
  if (used === null) throw new ApiError(401, { code: 'unauthenticated', detail: 'not signed in' });
  const headers = { Authorization: `Bearer ${used}`, Accept: 'application/json, application/problem+json, text/plain' };
  const init = { method, headers };
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  } else if (opts.raw !== undefined) {
    headers['Content-Type'] = opts.contentType || 'application/octet-stream';
    init.body = opts.raw;
  }
  const resp = await send(url, init);
  if (resp.status === 401) {
    const err = new ApiError(401, await readProblem(resp));
    if (token === used) {
      token = null;
      onUnauthorized(err);
    }
    throw err;
  }
  if (!resp.ok) throw new ApiError(resp.status, await readProblem(resp), resp.headers.get('Retry-After'));
  if (resp.status === 204) return null;
  if (opts.text) return resp.text();
  try {
    return await resp.json();
  } catch {
    throw new ApiError(resp.status, { code: 'bad_response', detail: `${method} ${url}: the answer is not JSON` });
  }
}
