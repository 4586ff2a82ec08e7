// dialogs.js: the one-time secret dialog and the confirm dialog.
//
// The secret dialog shows a session token (from create) or a minted token
// once. However it closes (its Close button, Escape, a click on the
// backdrop, dialog.close() from anywhere, signing out, changing view) the
// secret leaves the DOM and this module's memory: clearSecret runs on the
// 'cancel' and 'close' events, when the open attribute goes, and before
// every close this module starts.

import { byId } from './dom.js';

let secret = null;
let pendingConfirm = null;

function secretParts() {
  return {
    dialog: byId('secret-dialog'), value: byId('secret-value'), title: byId('secret-title'),
    copied: byId('secret-copied'),
  };
}

// clearSecret empties every place the secret was written to.
export function clearSecret() {
  const p = secretParts();
  secret = null;
  p.value.value = '';
  p.value.defaultValue = '';
  p.value.removeAttribute('value');
  p.copied.textContent = '';
  p.title.textContent = 'Secret';
}

// closeSecret clears the secret, then closes the dialog if it is open.
export function closeSecret() {
  clearSecret();
  const { dialog } = secretParts();
  if (dialog.open) dialog.close();
}

// showSecret opens the dialog on a secret; the previous one, if any, is gone.
export function showSecret(heading, value) {
  closeSecret();
  const p = secretParts();
  secret = String(value);
  p.title.textContent = heading;
  p.value.value = secret;
  p.dialog.showModal();
  p.value.focus();
  p.value.select();
}

async function copySecret() {
  const p = secretParts();
  if (secret === null) return;
  try {
    await navigator.clipboard.writeText(secret);
    p.copied.textContent = 'copied';
  } catch {
    // no clipboard permission: fall back to the selection
    p.value.focus();
    p.value.select();
    p.copied.textContent = document.execCommand('copy') ? 'copied' : 'select the text and copy it';
  }
}

// outside says whether a click on a dialog fell on its backdrop.
function outside(dialog, ev) {
  if (ev.target !== dialog) return false;
  const r = dialog.getBoundingClientRect();
  return ev.clientX < r.left || ev.clientX > r.right || ev.clientY < r.top || ev.clientY > r.bottom;
}

// confirmAction asks in a modal dialog; it resolves {ok, checked} (checked:
// the optional checkbox). A second request cancels the first.
export function confirmAction(text, { option, confirmLabel = 'Confirm' } = {}) {
  const dialog = byId('confirm-dialog');
  settleConfirm(false);
  if (dialog.open) dialog.close('cancel');
  byId('confirm-text').textContent = text;
  byId('confirm-ok').textContent = confirmLabel;
  byId('confirm-option').hidden = !option;
  byId('confirm-option-text').textContent = option || '';
  byId('confirm-check').checked = false;
  dialog.returnValue = '';
  return new Promise((resolve) => {
    pendingConfirm = resolve;
    dialog.showModal();
    byId('confirm-cancel').focus();
  });
}

// settleConfirm answers the pending confirmation, if any.
function settleConfirm(ok) {
  const resolve = pendingConfirm;
  pendingConfirm = null;
  if (resolve) resolve({ ok, checked: ok && byId('confirm-check').checked });
}

// closeAllDialogs closes every dialog (signing out, changing view).
export function closeAllDialogs() {
  closeSecret();
  for (const id of ['confirm-dialog', 'enroll-dialog']) {
    const d = byId(id);
    if (d.open) d.close('cancel');
  }
}

export function initDialogs() {
  const { dialog } = secretParts();
  byId('secret-close').addEventListener('click', closeSecret);
  byId('secret-copy').addEventListener('click', () => { copySecret(); });
  dialog.addEventListener('cancel', clearSecret);
  // A stale 'close' (the dialog was reopened on a new secret since) must
  // not clear the new secret; the close that queued it already did.
  dialog.addEventListener('close', () => { if (!dialog.open) clearSecret(); });
  // 'close' is queued as a task; this observer runs at the end of the very
  // script that closed the dialog (dialog.close() from anywhere).
  new MutationObserver(() => { if (!dialog.open) clearSecret(); })
    .observe(dialog, { attributes: true, attributeFilter: ['open'] });
  dialog.addEventListener('click', (ev) => { if (outside(dialog, ev)) closeSecret(); });

  const confirm = byId('confirm-dialog');
  byId('confirm-ok').addEventListener('click', () => confirm.close('ok'));
  byId('confirm-cancel').addEventListener('click', () => confirm.close('cancel'));
  confirm.addEventListener('click', (ev) => { if (outside(confirm, ev)) confirm.close('cancel'); });
  confirm.addEventListener('close', () => {
    if (!confirm.open) settleConfirm(confirm.returnValue === 'ok');
  });
}
