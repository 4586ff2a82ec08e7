// Unit tests of the logic behind the views: which views a token's scopes
// open, the refresh backoff, the sandbox filters and search, and the
// overview's sums.
import test from 'node:test';
import assert from 'node:assert/strict';
import { VIEWS, allowedViews, claimsOf } from '../../static/access.js';
import { ApiError, retrySeconds } from '../../static/api.js';
import { describe, InputError } from '../../static/dom.js';
import { MAX_MS, nextDelay } from '../../static/live.js';
import { clusterBudget, countBy, denialRules } from '../../static/overview.js';
import { matches, parseLabels, sandboxesQuery } from '../../static/sandboxes.js';

// jwt builds an unsigned token with the given payload (the dashboard
// never checks the signature: the gateway does).
function jwt(payload) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${b64({ alg: 'EdDSA', typ: 'JWT' })}.${b64(payload)}.c2ln`;
}

// The scopes of policies/data.json's roles (roles.<role>.scopes).
const SCOPES = {
  operator: ['sandboxes:create', 'sandboxes:list', 'status', 'exec', 'logs', 'files:read', 'files:write', 'destroy', 'extend',
    'hosts:read', 'hosts:write', 'tokens:read', 'tokens:write', 'policy:read', 'policy:evaluate'],
  agent: ['sandboxes:create', 'sandboxes:list', 'status', 'exec', 'logs', 'files:read', 'files:write', 'destroy'],
  session: ['status', 'exec', 'logs', 'files:read', 'files:write', 'destroy'],
  reviewer: ['policy:read', 'policy:evaluate'],
};

for (const [role, want] of [
  ['operator', ['overview', 'hosts', 'sandboxes', 'tokens', 'decisions', 'policy']],
  ['agent', ['overview', 'sandboxes']],
  ['reviewer', ['overview', 'decisions', 'policy']],
  ['session', []],
]) {
  test(`the scopes of a ${role} token open ${want.join(', ') || 'no view'}`, () => {
    const claims = claimsOf(jwt({ sub: 'x', role, scopes: SCOPES[role] }));
    assert.equal(claims.role, role);
    assert.deepEqual(allowedViews(claims), want);
  });
}

test('the views follow the scopes, not the role: an agent minted with fewer scopes sees less', () => {
  assert.deepEqual(allowedViews(claimsOf(jwt({ sub: 'x', role: 'agent', scopes: ['sandboxes:create'] }))), []);
  assert.deepEqual(allowedViews(claimsOf(jwt({ sub: 'x', role: 'operator', scopes: ['hosts:read'] }))), ['overview', 'hosts']);
});

test('the overview is first: an operator lands there', () => assert.equal(VIEWS[0].name, 'overview'));

test('claims are read from a base64url payload holding any text', () => {
  const c = claimsOf(jwt({ sub: 'équipe-ci?', role: 'agent', scopes: ['sandboxes:list', 7] }));
  assert.deepEqual({ ...c, scopes: [...c.scopes] }, { role: 'agent', sub: 'équipe-ci?', scopes: ['sandboxes:list'] });
});

for (const [name, tok] of [
  ['not a JWT', 'opaque-token'],
  ['two parts', 'a.b'],
  ['a payload that is not base64', 'a.%%%.c'],
  ['a payload that is not JSON', `a.${Buffer.from('nope').toString('base64url')}.c`],
  ['no role', jwt({ sub: 'x', scopes: [] })],
  ['scopes not a list', jwt({ sub: 'x', role: 'agent', scopes: 'sandboxes:list' })],
  ['not a string', null],
]) {
  test(`claims of ${name} are null`, () => assert.equal(claimsOf(tok), null));
}

test('the refresh waits longer after each failure, up to the maximum', () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5, 50].map((n) => nextDelay(5000, n)), [5000, 10000, 20000, 40000, MAX_MS, MAX_MS, MAX_MS]);
});

test("the refresh waits at least a refusal's Retry-After", () => {
  assert.equal(nextDelay(5000, 1, MAX_MS, 30), 30000);
  assert.equal(nextDelay(5000, 3, MAX_MS, 2), 40000);
});

test('Retry-After is read in seconds; anything else is 0', () => {
  assert.deepEqual(['7', ' 30 ', '', null, '-1', '1.5', 'Wed, 21 Oct 2026 07:28:00 GMT'].map(retrySeconds), [7, 30, 0, 0, 0, 0, 0]);
  assert.equal(new ApiError(429, { code: 'rate_limited' }, '3').retryAfter, 3);
});

test("a refusal is described with the problem's title, detail and rule ids", () => {
  const text = describe(new ApiError(403, {
    title: 'Denied by policy', code: 'policy_denied', detail: "E1: exec's program is an option", rule_ids: ['E1'],
  }));
  assert.equal(text, "Denied by policy\npolicy_denied (HTTP 403): E1: exec's program is an option\nrule ids: E1");
});

test('the sandbox filters become the query of GET /v1/sandboxes', () => {
  assert.equal(sandboxesQuery({}), '');
  assert.equal(sandboxesQuery({ all: true }), '?all=true');
  assert.equal(sandboxesQuery({
    node: 'worker-1', labels: ' team=ci , purpose=a=b ', principal: 'agent:ci',
  }), '?node=worker-1&label=team%3Dci&label=purpose%3Da%3Db&principal=agent%3Aci');
});

for (const [name, filters] of [
  ['a label without =', { labels: 'team' }],
  ['a label key the gateway refuses', { labels: 'Team=ci' }],
  ['more than 16 labels', { labels: Array.from({ length: 17 }, (_, i) => `k${i}=v`).join(',') }],
  ['a principal without its role', { principal: 'ci' }],
]) {
  test(`the sandbox filters refuse ${name}`, () => assert.throws(() => sandboxesQuery(filters), InputError));
}

test('labels parse into pairs, an empty value kept', () => {
  assert.deepEqual(parseLabels('a=1,,b='), [['a', '1'], ['b', '']]);
});

test('the search holds every word typed, in any case', () => {
  assert.equal(matches('k7x2 running worker-1 team=ci', 'WORKER-1 ci'), true);
  assert.equal(matches('k7x2 running worker-1 team=ci', 'worker-2'), false);
  assert.equal(matches('anything', '   '), true);
});

test('the cluster budget sums the enrolled hosts only', () => {
  const hosts = [
    { enrollment: 'sandbox', budget: { limits: { max_sandboxes: 10, cpu_mhz: 8000, memory_mb: 16384 }, used: { sandboxes: 2, cpu_mhz: 1000, memory_mb: 512 } } },
    { enrollment: 'sandbox+egress', budget: { limits: { max_sandboxes: 5, cpu_mhz: 4000, memory_mb: 4096 }, used: { sandboxes: 1, cpu_mhz: 500, memory_mb: 256 } } },
    { enrollment: 'none', budget: { limits: { max_sandboxes: 99, cpu_mhz: 99, memory_mb: 99 }, used: { sandboxes: 9 } } },
    { enrollment: 'sandbox', budget: null },
  ];
  assert.deepEqual(clusterBudget(hosts), {
    hosts: 3,
    used: { sandboxes: 3, cpu_mhz: 1500, memory_mb: 768 },
    limits: { max_sandboxes: 15, cpu_mhz: 12000, memory_mb: 20480 },
  });
  assert.deepEqual(clusterBudget(null).hosts, 0);
});

test('denials are counted by rule, the most frequent first', () => {
  assert.deepEqual(denialRules([{ rule_ids: ['T2'] }, { rule_ids: ['B2', 'T2'] }, { rule_ids: 'X' }, {}]), [['T2', 2], ['B2', 1]]);
  assert.deepEqual(countBy([{ s: 'running' }, { s: 'starting' }, { s: 'running' }], (x) => x.s), [['running', 2], ['starting', 1]]);
});
