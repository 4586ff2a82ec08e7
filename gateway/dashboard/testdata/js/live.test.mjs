// Unit tests of the refreshes (live.js) on a stand-in document: nothing is
// asked while the page is hidden, a page shown again refreshes at once, a
// failure backs off, and a busy user skips a turn.
import test from 'node:test';
import assert from 'node:assert/strict';

const listeners = new Map();
const doc = {
  visibilityState: 'visible',
  open: false, // a dialog is open
  addEventListener: (ev, fn) => listeners.set(ev, fn),
  removeEventListener: (ev) => listeners.delete(ev),
  querySelector: (sel) => (sel === 'dialog[open]' && doc.open ? {} : null),
  getElementById: (id) => ({ id, textContent: '', hidden: true }),
  activeElement: null,
};
globalThis.document = doc;

const { ApiError } = await import('../../static/api.js');
const { Poller, busyWithin } = await import('../../static/live.js');

// timers replaces setTimeout: the test fires the pending one by hand.
function fakeTimers(t) {
  const pending = [];
  t.mock.method(globalThis, 'setTimeout', (fn, ms) => { pending.push({ fn, ms }); return pending.length; });
  t.mock.method(globalThis, 'clearTimeout', () => {});
  return pending;
}

test('a hidden page asks nothing; shown again, it refreshes at once', async (t) => {
  const pending = fakeTimers(t);
  let loads = 0;
  doc.visibilityState = 'hidden';
  const p = new Poller(async () => { loads += 1; }, { every: 5000 });
  p.start();
  assert.equal(pending.length, 0, 'a refresh was scheduled while hidden');
  doc.visibilityState = 'visible';
  listeners.get('visibilitychange')();
  await new Promise((r) => { setImmediate(r); });
  assert.equal(loads, 1);
  assert.equal(pending.at(-1).ms, 5000);
  p.stop();
  assert.equal(listeners.has('visibilitychange'), false);
});

test('failures back off, honouring Retry-After; a success resets the wait', async (t) => {
  const pending = fakeTimers(t);
  doc.visibilityState = 'visible';
  const answers = [new ApiError(503, {}), new ApiError(429, { code: 'rate_limited' }, '30'), null];
  const p = new Poller(async () => { const a = answers.shift(); if (a) throw a; }, { every: 5000, quiet: true });
  p.start();
  const waits = [];
  for (let i = 0; i < 3; i++) {
    await pending.at(-1).fn();
    waits.push(pending.at(-1).ms);
  }
  p.stop();
  assert.deepEqual(waits, [10000, 30000, 5000]);
});

test('a 401 stops the refreshes', async (t) => {
  const pending = fakeTimers(t);
  const p = new Poller(async () => { throw new ApiError(401, {}); }, { every: 5000, quiet: true });
  p.start();
  const before = pending.length;
  await pending.at(-1).fn();
  assert.equal(pending.length, before, 'a refresh was scheduled after a 401');
  assert.equal(p.running, false);
});

test('an open dialog skips the turn without asking', async (t) => {
  const pending = fakeTimers(t);
  let loads = 0;
  const p = new Poller(async () => { loads += 1; }, { every: 5000, skip: () => busyWithin(null) });
  doc.open = true;
  p.start();
  await pending.at(-1).fn();
  assert.equal(loads, 0);
  doc.open = false;
  await pending.at(-1).fn();
  assert.equal(loads, 1);
  p.stop();
});
