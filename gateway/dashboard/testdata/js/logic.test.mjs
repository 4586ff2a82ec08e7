// Unit tests of the dashboard's pure logic: capability detection, bar
// thresholds, field parsing, time formatting and error descriptions.
import test from 'node:test';
import assert from 'node:assert/strict';
import { NEEDED, missingCapabilities } from '../../static/caps.js';
import { BUDGET, USAGE, level, percent } from '../../static/bars.js';
import { ApiError } from '../../static/api.js';
import {
  InputError, describe, fmtTime, intField, relative, submitForm, textField,
} from '../../static/dom.js';

test('a gateway advertising everything lacks nothing', () => {
  assert.deepEqual(missingCapabilities({ capabilities: [...NEEDED, 'metrics'] }), []);
});

test('an old gateway lacks what it does not advertise', () => {
  assert.deepEqual(missingCapabilities({ capabilities: ['sandboxes.v1'] }),
    ['sandboxes.exec.v1', 'hosts.v1', 'tokens.v1', 'decisions.v1']);
});

for (const [name, answer] of [
  ['a malformed answer lacks everything', { capabilities: 'sandboxes.v1' }],
  ['no answer lacks everything', null],
  ['non-string entries do not count', { capabilities: [1, { id: 'hosts.v1' }] }],
]) {
  test(name, () => assert.deepEqual(missingCapabilities(answer), [...NEEDED]));
}

const levels = [
  ['memory below 85 % is ok', 84.9, USAGE.memory, 'ok'],
  ['memory at 85 % warns (P3 refuses new sandboxes)', 85, USAGE.memory, 'warn'],
  ['memory at 95.9 % still only warns', 95.9, USAGE.memory, 'warn'],
  ['memory at 96 % is critical (R3 reclaims)', 96, USAGE.memory, 'crit'],
  ['disk at 91.9 % warns', 91.9, USAGE.disk, 'warn'],
  ['disk at 92 % is critical (R3 reclaims)', 92, USAGE.disk, 'crit'],
  ['a budget at 84 % is ok', 84, BUDGET, 'ok'],
  ['a budget at 90 % warns', 90, BUDGET, 'warn'],
  ['a full budget is critical', 100, BUDGET, 'crit'],
  ['an unknown figure is unknown', NaN, BUDGET, 'unknown'],
  ['a missing figure is unknown', undefined, USAGE.disk, 'unknown'],
];
for (const [name, pct, t, want] of levels) {
  test(name, () => assert.equal(level(pct, t), want));
}

test('percent divides used by limit', () => assert.equal(percent(512, 2048), 25));
for (const [name, used, limit] of [
  ['a zero limit has no percentage', 1, 0],
  ['a negative limit has no percentage', 1, -5],
  ['a missing limit has no percentage', 1, undefined],
  ['a missing use has no percentage', undefined, 10],
]) {
  test(name, () => assert.ok(Number.isNaN(percent(used, limit))));
}

test('an empty number field is absent', () => assert.equal(intField({ value: '  ' }, 'x'), undefined));
test('a whole number field is read', () => assert.equal(intField({ value: ' 600 ' }, 'x'), 600));
for (const v of ['0', '-3', '1.5', '1e3', 'abc', '99999999999999999999']) {
  test(`a number field holding ${JSON.stringify(v)} is refused`, () => assert.throws(() => intField({ value: v }, 'TTL'), InputError));
}
test('an empty text field is absent', () => assert.equal(textField({ value: ' ' }), undefined));
test('a text field is trimmed', () => assert.equal(textField({ value: ' worker-1 ' }), 'worker-1'));

test('times show in UTC without fractions', () => assert.equal(fmtTime('2026-11-29T10:00:00.123Z'), '2026-11-29 10:00:00 UTC'));
test('an absent time is a dash', () => assert.equal(fmtTime(''), '—'));
test('an unparseable time is shown as given', () => assert.equal(fmtTime('soon'), 'soon'));
test('a future time is "in"', () => assert.equal(relative('2026-01-01T01:00:00Z', Date.parse('2026-01-01T00:00:00Z')), 'in 60 min'));
test('a past time is "ago"', () => assert.equal(relative('2026-01-01T00:00:00Z', Date.parse('2026-01-01T00:00:30Z')), '30 s ago'));

test('a policy refusal is described with its code, rule ids and decision', () => {
  const err = new ApiError(403, {
    code: 'policy_denied', detail: 'T2: session token is bound to another sandbox', rule_ids: ['T2'], decision_id: 'd-1',
  });
  const text = describe(err);
  for (const part of ['policy_denied', 'HTTP 403', 'T2: session token', 'rule ids: T2', 'decision: d-1']) {
    assert.ok(text.includes(part), `${JSON.stringify(text)} lacks ${part}`);
  }
});

test('a problem of the wrong shape still describes safely', () => {
  const err = new ApiError(500, { detail: 42, rule_ids: 'H1', code: null });
  assert.equal(err.message, 'HTTP 500');
  assert.deepEqual(err.ruleIds, []);
  assert.equal(describe(err), 'error (HTTP 500): HTTP 500');
});

test('a replay query takes an RFC 3339 since and a limit, and refuses other times', async () => {
  const { replayQuery } = await import('../../static/policy.js');
  assert.equal(replayQuery(undefined, undefined), '');
  assert.equal(replayQuery('2026-12-01T09:00:00Z', 200), '?since=2026-12-01T09%3A00%3A00Z&limit=200');
  assert.throws(() => replayQuery('yesterday', undefined), InputError);
  assert.throws(() => replayQuery('12/01/2026', undefined), InputError);
});

test("a form's failed action shows in the form's own box, and re-enables its button", async () => {
  const button = { disabled: false };
  const box = { textContent: '', hidden: true };
  await submitForm(button, box, async () => {
    assert.equal(button.disabled, true);
    throw new ApiError(403, { code: 'policy_denied', detail: 'B1: too big', rule_ids: ['B1'] });
  });
  assert.equal(box.hidden, false);
  assert.ok(box.textContent.includes('rule ids: B1'), box.textContent);
  assert.equal(button.disabled, false);
});

test("a form's next successful action clears its box", async () => {
  const box = { textContent: 'policy_denied (HTTP 403): B1', hidden: false };
  assert.equal(await submitForm({ disabled: false }, box, async () => 7), 7);
  assert.deepEqual(box, { textContent: '', hidden: true });
});

test('a 401 is not shown in the form: the sign-in screen says it', async () => {
  const box = { textContent: '', hidden: true };
  await submitForm({ disabled: false }, box, async () => { throw new ApiError(401, { detail: 'expired' }); });
  assert.deepEqual(box, { textContent: '', hidden: true });
});

test("a sandbox's labels are key=value pairs sorted by key", async () => {
  const { labelPairs } = await import('../../static/fields.js');
  assert.deepEqual(labelPairs({ team: 'ci', purpose: '<b>x</b>' }), ['purpose=<b>x</b>', 'team=ci']);
  for (const none of [undefined, null, {}, [], 'team=ci']) assert.deepEqual(labelPairs(none), []);
});

test('resources show with their unit, a missing one as a dash', async () => {
  const { mb, mhz } = await import('../../static/fields.js');
  assert.equal(mhz(250), '250 MHz');
  assert.equal(mb(128), '128 MB');
  for (const v of [undefined, 0, -1, NaN, '250']) {
    assert.equal(mhz(v), '—');
    assert.equal(mb(v), '—');
  }
});

test('the decision filters become the query of GET /v1/decisions', async () => {
  const { decisionsQuery } = await import('../../static/decisions.js');
  assert.equal(decisionsQuery({}), '?limit=50');
  assert.equal(decisionsQuery({ allow: 'false', limit: 500 }), '?allow=false&limit=500');
  assert.equal(decisionsQuery({
    allow: 'true', entrypoint: 'hosts', principal: 'agent:ci & co', rule: 'p2',
  }), '?allow=true&entrypoint=hosts&principal=agent%3Aci+%26+co&rule=P2&limit=50');
});

for (const [name, filters] of [
  ['a result other than all, allowed or denied', { allow: 'maybe' }],
  ['an unknown entrypoint', { entrypoint: 'isolation' }],
  ['a principal past 128 bytes', { principal: 'é'.repeat(65) }],
  ['a rule that is not a rule id', { rule: 'not a rule!' }],
  ['a rule id past 32 bytes', { rule: 'R'.repeat(33) }],
]) {
  test(`the decision filters refuse ${name}`, async () => {
    const { decisionsQuery } = await import('../../static/decisions.js');
    assert.throws(() => decisionsQuery(filters), InputError);
  });
}
