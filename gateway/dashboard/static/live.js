// live.js: refreshing a view while it is shown. The gateway has no event
// stream for its lists, so a shown view polls its list routes: every few
// seconds while it answers, backing off (doubling, up to a minute, and
// never sooner than a Retry-After) while it does not, paused while the
// page is hidden and resumed at once when it shows again. A refresh never
// runs under the user's hands: while a dialog is open or a control of the
// refreshed area has the focus, the tick is skipped (the next one tries
// again), so an open dialog, a select being changed or the console keep
// their state.

import { ApiError } from './api.js';
import { byId, clearError, showError } from './dom.js';

export const EVERY_MS = 5000;
export const MAX_MS = 60000;

// nextDelay is the wait before the next refresh after `failures` failed
// ones in a row; retryAfter is the last refusal's Retry-After in seconds.
export function nextDelay(every, failures, max = MAX_MS, retryAfter = 0) {
  const n = Math.max(0, Math.min(failures, 16));
  let d = Math.min(max, every * (2 ** n));
  if (Number.isFinite(retryAfter) && retryAfter > 0) d = Math.max(d, Math.min(retryAfter * 1000, 10 * max));
  return d;
}

// busyWithin says whether the user is at work on an area a refresh
// replaces: a dialog is open, or a control inside the area has the focus.
export function busyWithin(area) {
  if (document.querySelector('dialog[open]')) return true;
  const a = document.activeElement;
  return !!(a && a !== document.body && area && area.contains(a) && a.matches('input, select, textarea, button'));
}

// Poller refreshes with load() while started. load's errors show in the
// page's error banner (and leave it when the next refresh succeeds),
// unless quiet (load shows them itself); a 401 has already signed the
// user out, and stops the poller.
export class Poller {
  constructor(load, {
    every = EVERY_MS, max = MAX_MS, skip = () => false, quiet = false,
  } = {}) {
    this.load = load;
    this.quiet = quiet;
    this.every = every;
    this.max = max;
    this.skip = skip;
    this.timer = null;
    this.running = false;
    this.inFlight = false;
    this.failures = 0;
    this.retryAfter = 0;
    this.shown = ''; // the error text this poller put in the banner
    this.onVisibility = () => this.visibility();
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.failures = 0;
    document.addEventListener('visibilitychange', this.onVisibility);
    this.schedule();
  }

  stop() {
    this.running = false;
    document.removeEventListener('visibilitychange', this.onVisibility);
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  schedule() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (!this.running || document.visibilityState !== 'visible') return; // resumed by visibility()
    this.timer = setTimeout(() => { this.tick(); }, nextDelay(this.every, this.failures, this.max, this.retryAfter));
  }

  visibility() {
    if (!this.running) return;
    if (document.visibilityState === 'visible') this.tick();
    else if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  async tick() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (!this.running || this.inFlight) return;
    if (this.skip()) {
      this.schedule();
      return;
    }
    this.inFlight = true;
    try {
      await this.load();
      this.failures = 0;
      this.retryAfter = 0;
      if (this.shown && byId('error-text').textContent === this.shown) clearError();
      this.shown = '';
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        this.stop();
        return;
      }
      this.failures += 1;
      this.retryAfter = err instanceof ApiError ? err.retryAfter : 0;
      if (!this.quiet) {
        showError(err);
        this.shown = byId('error-text').textContent;
      }
    } finally {
      this.inFlight = false;
    }
    this.schedule();
  }
}
