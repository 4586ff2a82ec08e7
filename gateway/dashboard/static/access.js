// access.js: what the signed-in token may use, and so which views and
// controls the dashboard offers it.
//
// A sandgate token is a JWT the gateway signed when it minted it; its
// claims carry the token's role, subject and scopes (docs/api.md,
// "Tokens"). The route table of the policy (roles.<role>.scopes and
// routes.<method>.<path>.scope, rule T2) grants a route only to a token
// holding the route's scope, so each view needs the scope of the route it
// reads, and a view whose scope the token lacks is not offered: an agent
// token sees its sandboxes, never a red 403 on the hosts or tokens. The
// claims only decide what is offered: the gateway still decides every
// request, and a view its first load finds refused (403) is cut too
// (app.js), so a policy that grants less than the scopes say never shows
// a dead view.
//
// The claims are read without checking the signature: they are not
// trusted here, only used to leave out what the gateway would refuse.

// VIEWS are the dashboard's views in the order of the navigation; the
// first one a token may use is where it lands. Each lists the scopes it
// needs (all of them); the overview's sections are cut one by one
// (overview.js), so the view needs any one of theirs.
export const VIEWS = Object.freeze([
  Object.freeze({ name: 'overview', anyScope: Object.freeze(['sandboxes:list', 'hosts:read', 'policy:read']) }),
  Object.freeze({ name: 'hosts', scopes: Object.freeze(['hosts:read']) }),
  Object.freeze({ name: 'sandboxes', scopes: Object.freeze(['sandboxes:list']) }),
  Object.freeze({ name: 'tokens', scopes: Object.freeze(['tokens:read']) }),
  Object.freeze({ name: 'decisions', scopes: Object.freeze(['policy:read']) }),
  Object.freeze({ name: 'policy', scopes: Object.freeze(['policy:read']) }),
]);

// claimsOf reads the role, subject and scopes of a JWT's payload; null
// when the token is not a JWT with a role and a scope list.
export function claimsOf(jwt) {
  const parts = typeof jwt === 'string' ? jwt.split('.') : [];
  if (parts.length !== 3 || parts[1] === '') return null;
  let payload;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    payload = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
  } catch {
    return null;
  }
  if (!payload || typeof payload !== 'object' || typeof payload.role !== 'string' || !Array.isArray(payload.scopes)) return null;
  return Object.freeze({
    role: payload.role,
    sub: typeof payload.sub === 'string' ? payload.sub : '',
    scopes: Object.freeze(payload.scopes.filter((s) => typeof s === 'string')),
  });
}

// viewAllowed says whether claims hold the scopes a view needs.
export function viewAllowed(view, claims) {
  const have = new Set(claims ? claims.scopes : []);
  if (view.anyScope) return view.anyScope.some((s) => have.has(s));
  return view.scopes.every((s) => have.has(s));
}

// allowedViews are the names of the views claims may use, in order.
export function allowedViews(claims) {
  return VIEWS.filter((v) => viewAllowed(v, claims)).map((v) => v.name);
}

let current = null; // the claims of the signed-in token

export function setClaims(claims) {
  current = claims;
}

export function forgetClaims() {
  current = null;
}

// may says whether the signed-in token holds a scope.
export function may(scope) {
  return current !== null && current.scopes.includes(scope);
}

// principal is the signed-in token's principal, "<role>:<sub>" (rule B3).
export function principal() {
  return current ? `${current.role}:${current.sub}` : '';
}

// listsOthers says whether the token lists every principal's sandboxes:
// the list's principal filter is for operators only (docs/api.md, List:
// an agent always lists its own, and naming another principal is a 400).
export function listsOthers() {
  return current !== null && current.role === 'operator';
}
