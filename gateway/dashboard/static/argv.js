// argv.js: turning the exec console's command line into an argument vector.
//
// No shell runs anywhere (rule E1): the line is split here, the way a
// POSIX shell splits words, without expansions. Whitespace separates
// words; 'single quotes' keep everything literally; "double quotes" keep
// everything but \" and \\; outside quotes a backslash keeps the next
// character. A line starting with "[" is a JSON array of strings instead.

// ArgvError is a command line that cannot be split.
export class ArgvError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ArgvError';
  }
}

// parseArgv splits a command line into a non-empty array of strings, or
// throws ArgvError.
export function parseArgv(line) {
  if (typeof line !== 'string') throw new ArgvError('the command is not text');
  const s = line.trim();
  if (s === '') throw new ArgvError('the command is empty');
  return s.startsWith('[') ? parseJSON(s) : split(s);
}

function parseJSON(s) {
  let v;
  try {
    v = JSON.parse(s);
  } catch (e) {
    throw new ArgvError(`a command starting with "[" must be a JSON array: ${e.message}`);
  }
  if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === 'string')) {
    throw new ArgvError('a JSON command must be a non-empty array of strings');
  }
  return v;
}

function split(s) {
  const out = [];
  let word = '';
  let inWord = false;
  let quote = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quote === "'") {
      if (c === "'") quote = '';
      else word += c;
      continue;
    }
    if (quote === '"') {
      if (c === '"') quote = '';
      else if (c === '\\' && (s[i + 1] === '"' || s[i + 1] === '\\')) word += s[++i];
      else word += c;
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === '\\') {
      if (i + 1 >= s.length) throw new ArgvError('the command ends with a lone backslash');
      word += s[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new ArgvError(`unterminated ${quote === '"' ? 'double' : 'single'} quote`);
  if (inWord) out.push(word);
  return out;
}
