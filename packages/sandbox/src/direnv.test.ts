// Invariant: every file an .envrc loads with direnv's stdlib or bash's source is found, in the
// spellings .envrc files use, and what cannot be known (another variable, a substitution) is left
// out rather than guessed.
import { describe, expect, it } from 'vitest';
import { envrcLoads } from './direnv.js';

const dirs = new Set(['/w/sub', '/w', '/']);
const loads = (text: string) => envrcLoads('/w/.envrc', text, '/home/u', (p) => dirs.has(p)).sort();

describe('what an .envrc loads', () => {
  it('source_env, source_env_if_exists, dotenv, dotenv_if_exists, source and . with a file', () => {
    expect(
      loads(
        [
          'source_env_if_exists .envrc.local',
          'source_env scripts/env.sh',
          'dotenv config/dev.env',
          'dotenv_if_exists .env.shared',
          'source ./tools/activate.sh',
          '. lib/more.sh',
        ].join('\n'),
      ),
    ).toEqual(
      [
        '/w/.envrc.local',
        '/w/scripts/env.sh',
        '/w/config/dev.env',
        '/w/.env.shared',
        '/w/tools/activate.sh',
        '/w/lib/more.sh',
      ].sort(),
    );
  });

  it('quotes, $PWD, ${HOME}, ~, after ; && || then else, indented, with a comment after', () => {
    expect(
      loads(
        [
          'source_env_if_exists "$PWD/.envrc.private" # local overrides',
          'if has nix; then source_env \'.envrc.nix\'; else dotenv "${HOME}/shared.env"; fi',
          '  [ -f x ] && source_env ~/team.envrc || true',
          'watch_file flake.nix; . "${PWD}/bin/env"',
        ].join('\n'),
      ),
    ).toEqual(
      ['/w/.envrc.private', '/w/.envrc.nix', '/home/u/shared.env', '/home/u/team.envrc', '/w/bin/env'].sort(),
    );
  });

  it("source_env of a directory loads that directory's .envrc", () => {
    expect(loads('source_env sub\nsource_env_if_exists ..')).toEqual(['/.envrc', '/w/sub/.envrc'].sort());
  });

  it('targets it cannot know are left out; comments, other commands and the .envrc itself are not loads', () => {
    expect(
      loads(
        [
          'source_env "$PROJECT_ROOT/env.sh"',
          'source_env $(git rev-parse --show-toplevel)/x',
          'dotenv `pwd`/y',
          'source_env *.sh',
          '# source_env commented.sh',
          'echo source_env not-a-call',
          'PATH_add bin',
          'source_up',
          'dotenv',
          'source_env .envrc',
        ].join('\n'),
      ),
    ).toEqual([]);
  });
});
