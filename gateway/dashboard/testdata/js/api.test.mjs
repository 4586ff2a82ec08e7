// Unit tests of the REST client with a fake fetch: the Bearer header, the
// problem+json errors, and a 401 forgetting the token.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  ApiError, forgetToken, path, request, setToken, setUnauthorizedHandler, signedIn,
} from '../../static/api.js';

function fakeFetch(answer) {
  const calls = [];
  globalThis.fetch = async (url, init) => {
    calls.push({ url, init });
    return answer();
  };
  return calls;
}

function json(status, obj, type = 'application/json') {
  return new Response(status === 204 ? null : JSON.stringify(obj), { status, headers: { 'Content-Type': type } });
}

test('every call sends the token as a Bearer header and no cookie', async () => {
  const calls = fakeFetch(() => json(200, { sandboxes: [] }));
  setToken('tok-123');
  const got = await request('GET', '/v1/sandboxes');
  assert.deepEqual(got, { sandboxes: [] });
  assert.equal(calls[0].init.headers.Authorization, 'Bearer tok-123');
  assert.equal(calls[0].init.credentials, 'omit');
  assert.ok(!calls[0].url.includes('tok-123'), 'the token is in the URL');
  forgetToken();
});

test('a body is sent as JSON', async () => {
  const calls = fakeFetch(() => json(201, { id: 'x' }));
  setToken('t');
  await request('POST', '/v1/sandboxes', { body: { ttl_seconds: 600 } });
  assert.equal(calls[0].init.headers['Content-Type'], 'application/json');
  assert.equal(calls[0].init.body, '{"ttl_seconds":600}');
  forgetToken();
});

test('a 204 answers null', async () => {
  fakeFetch(() => json(204));
  setToken('t');
  assert.equal(await request('DELETE', '/v1/sandboxes/x'), null);
  forgetToken();
});

test('a refusal throws the problem with its rule ids', async () => {
  fakeFetch(() => json(403, { code: 'policy_denied', detail: 'no', rule_ids: ['P3'], decision_id: 'd' }, 'application/problem+json'));
  setToken('t');
  await assert.rejects(request('POST', '/v1/sandboxes', { body: {} }), (err) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.status, 403);
    assert.equal(err.code, 'policy_denied');
    assert.deepEqual(err.ruleIds, ['P3']);
    return true;
  });
  assert.ok(signedIn(), 'a 403 must not sign out');
  forgetToken();
});

test('a 401 forgets the token and returns to sign-in', async () => {
  fakeFetch(() => json(401, { code: 'unauthenticated', detail: 'revoked (T4)' }));
  let handled = null;
  setUnauthorizedHandler((err) => { handled = err; });
  setToken('t');
  await assert.rejects(request('GET', '/v1/hosts'), ApiError);
  assert.equal(signedIn(), false);
  assert.equal(handled && handled.code, 'unauthenticated');
  setUnauthorizedHandler(() => {});
});

test('without a token nothing is sent', async () => {
  const calls = fakeFetch(() => json(200, {}));
  forgetToken();
  await assert.rejects(request('GET', '/v1/hosts'), (err) => err.status === 401);
  assert.equal(calls.length, 0);
});

test('a network failure is an error, not a crash', async () => {
  globalThis.fetch = async () => { throw new TypeError('connection refused'); };
  setToken('t');
  await assert.rejects(request('GET', '/v1/hosts'), (err) => err.code === 'network_error');
  forgetToken();
});

test('a non-JSON error body still yields a problem', async () => {
  fakeFetch(() => new Response('<html>bad gateway</html>', { status: 502 }));
  setToken('t');
  await assert.rejects(request('GET', '/v1/hosts'), (err) => err.status === 502 && err.message.includes('bad gateway'));
  forgetToken();
});

test('path segments are escaped', () => {
  assert.equal(path('/v1/hosts', 'a/b c', 'state'), '/v1/hosts/a%2Fb%20c/state');
});
