// Unit tests of the exec console's command-line splitting (run by
// `go test` through node's test runner; see scripts_test.go).
import test from 'node:test';
import assert from 'node:assert/strict';
import { ArgvError, parseArgv } from '../../static/argv.js';

const splits = [
  ['a plain command splits on spaces', 'echo hi', ['echo', 'hi']],
  ['runs of whitespace and tabs separate once', '  ls \t -la   /tmp ', ['ls', '-la', '/tmp']],
  ['single quotes keep spaces and backslashes', "sh -c 'echo a  b\\n'", ['sh', '-c', 'echo a  b\\n']],
  ['double quotes keep spaces', 'printf "%s %s" x', ['printf', '%s %s', 'x']],
  ['double quotes unescape a quote and a backslash', 'echo "say \\"hi\\" \\\\ \\n"', ['echo', 'say "hi" \\ \\n']],
  ['a backslash outside quotes keeps the next character', 'echo a\\ b', ['echo', 'a b']],
  ['quotes join with the word around them', 'echo pre"mid"\'post\'', ['echo', 'premidpost']],
  ['empty quotes are an empty argument', 'printf "" x', ['printf', '', 'x']],
  ['shell operators are plain words', 'echo a; rm -rf / | cat', ['echo', 'a;', 'rm', '-rf', '/', '|', 'cat']],
  ['a JSON array is taken as is', '["sh", "-c", "echo $HOME"]', ['sh', '-c', 'echo $HOME']],
  ['unicode survives', "echo 'héllo wörld' ✓", ['echo', 'héllo wörld', '✓']],
];

for (const [name, line, want] of splits) {
  test(name, () => assert.deepEqual(parseArgv(line), want));
}

const refusals = [
  ['an empty line is refused', ''],
  ['a blank line is refused', '   \t '],
  ['an unterminated single quote is refused', "echo 'abc"],
  ['an unterminated double quote is refused', 'echo "abc'],
  ['a trailing lone backslash is refused', 'echo abc\\'],
  ['malformed JSON is refused', '["echo", '],
  ['an empty JSON array is refused', '[]'],
  ['a JSON array of non-strings is refused', '["echo", 1]'],
  ['a JSON object is not an array', '[{"a": 1}]'],
  ['a value that is not text is refused', null],
];

for (const [name, line] of refusals) {
  test(name, () => assert.throws(() => parseArgv(line), ArgvError));
}
