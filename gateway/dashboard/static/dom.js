// dom.js: building the page safely, and showing errors.
//
// API data (labels, exec output, logs, rule messages) is attacker-
// controlled: it only ever reaches the DOM as textContent or a form
// control's value, never as HTML. el() accepts a fixed set of properties
// and refuses anything else (innerHTML, style, event attributes).

import { ApiError } from './api.js';

// state.locked: the gateway lacks a capability; every control is disabled.
export const state = { locked: false };

const CONTROLS = new Set(['BUTTON', 'INPUT', 'SELECT', 'TEXTAREA', 'FIELDSET']);
const PROPS = new Set(['id', 'type', 'value', 'name', 'title', 'disabled', 'checked', 'selected',
  'hidden', 'colSpan', 'min', 'max', 'step', 'placeholder', 'readOnly']);

export function byId(id) {
  const e = document.getElementById(id);
  if (!e) throw new Error(`dashboard: no element #${id}`);
  return e;
}

// el builds an element: props are class, text, dataset, aria (an object
// of aria-* values), on (event listeners) and the plain properties above.
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = String(v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k === 'aria') for (const [a, av] of Object.entries(v)) e.setAttribute(`aria-${a}`, String(av));
    else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
    else if (PROPS.has(k)) e[k] = v;
    else throw new Error(`dashboard: el() refuses property ${k}`);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  if (state.locked && CONTROLS.has(e.tagName)) e.disabled = true;
  return e;
}

export function clear(node) {
  node.replaceChildren();
}

// disableAll disables every control on the page, now and (through el) later.
export function disableAll() {
  state.locked = true;
  for (const c of document.querySelectorAll('button, input, select, textarea, fieldset')) c.disabled = true;
  document.body.classList.add('locked');
}

// describe turns an error into the lines the error area shows.
export function describe(err) {
  if (err instanceof ApiError) {
    const lines = [`${err.code || 'error'} (HTTP ${err.status || 'no answer'}): ${err.message}`];
    // the problem's title ("Denied by policy") heads it when the detail says more
    if (err.title && err.title !== err.message) lines.unshift(err.title);
    if (err.field) lines.push(`field: ${err.field}`);
    if (err.ruleIds.length) lines.push(`rule ids: ${err.ruleIds.join(', ')}`);
    if (err.decisionId) lines.push(`decision: ${err.decisionId}`);
    if (err.requestId) lines.push(`request: ${err.requestId}`);
    return lines.join('\n');
  }
  return String((err && err.message) || err);
}

export function showError(err) {
  byId('error-text').textContent = describe(err);
  byId('error').hidden = false;
}

export function clearError() {
  byId('error-text').textContent = '';
  byId('error').hidden = true;
}

export function notice(text) {
  const n = byId('notice');
  n.textContent = text;
  n.hidden = !text;
}

// run calls an async action and shows what goes wrong: no rejection is
// ever left unhandled. A 401 has already returned to the sign-in screen.
export async function run(fn) {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) showError(err);
    return undefined;
  }
}

// showFormError shows an error in a form's own error box (a .form-error
// element beside the form's controls).
export function showFormError(box, err) {
  box.textContent = describe(err);
  box.hidden = false;
}

export function clearFormError(box) {
  box.textContent = '';
  box.hidden = true;
}

// clearFormErrors empties every form's error box (signing out, a new sandbox in the panel).
export function clearFormErrors(root = document) {
  for (const box of root.querySelectorAll('.form-error')) clearFormError(box);
}

// submitForm runs a form's action with its button disabled. What goes
// wrong shows in the form's own error box, not the global banner; a
// success clears the box. A 401 has already returned to the sign-in screen.
export async function submitForm(button, box, fn) {
  button.disabled = true;
  try {
    const v = await fn();
    clearFormError(box);
    return v;
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) showFormError(box, err);
    return undefined;
  } finally {
    button.disabled = state.locked;
  }
}

// busy disables a button while an action runs; an error goes to the
// global banner (actions that belong to no form).
export async function busy(button, fn) {
  button.disabled = true;
  try {
    return await run(fn);
  } finally {
    button.disabled = state.locked;
  }
}

// InputError is a form field the dashboard refuses before calling the API.
export class InputError extends Error {
  constructor(message) {
    super(message);
    this.name = 'InputError';
  }
}

// intField reads an optional positive integer field: undefined when empty.
export function intField(input, what) {
  const s = input.value.trim();
  if (s === '') return undefined;
  if (!/^[0-9]+$/.test(s) || Number(s) < 1 || !Number.isSafeInteger(Number(s))) {
    throw new InputError(`${what} must be a positive whole number`);
  }
  return Number(s);
}

// textField reads an optional text field: undefined when empty.
export function textField(input) {
  const s = input.value.trim();
  return s === '' ? undefined : s;
}

// fmtTime shows an RFC 3339 time as "YYYY-MM-DD HH:MM:SS"; empty is "—".
export function fmtTime(iso) {
  if (typeof iso !== 'string' || iso === '') return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace('Z', ' UTC');
}

// relative says how far a time is from now: "in 59 min", "3 min ago".
export function relative(iso, now = Date.now()) {
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return '';
  const s = Math.round((t - now) / 1000);
  const a = Math.abs(s);
  const v = a < 90 ? `${a} s` : a < 5400 ? `${Math.round(a / 60)} min` : `${Math.round(a / 3600)} h`;
  return s >= 0 ? `in ${v}` : `${v} ago`;
}

// actionsCell is the cell of a row's buttons. The flex layout is on a
// wrapper inside it: a td must stay display: table-cell, or the row's
// borders break.
export function actionsCell(...children) {
  return el('td', { class: 'actions-cell' }, el('div', { class: 'actions' }, ...children));
}

// timeCell shows a time, with how far it is from now when withRelative;
// cls is the cell's class, if any.
export function timeCell(iso, withRelative, cls) {
  // the date and the clock each stay whole; a narrow table puts them on two lines
  const shown = fmtTime(iso);
  const parts = /^(\d{4}-\d\d-\d\d) (.+)$/.exec(shown);
  const td = el('td', { class: cls ? `time ${cls}` : 'time', title: iso || undefined },
    parts ? [el('span', { class: 'date', text: parts[1] }), ' ', el('span', { class: 'clock', text: parts[2] })] : shown);
  if (withRelative && iso) td.append(el('span', { class: 'hint', text: ` (${relative(iso)})` }));
  return td;
}

// fillTable replaces a table body's rows and shows its "empty" note when there are none.
export function fillTable(tbody, emptyNote, rows) {
  clear(tbody);
  tbody.append(...rows);
  emptyNote.hidden = rows.length > 0;
}
