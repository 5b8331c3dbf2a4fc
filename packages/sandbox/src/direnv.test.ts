// Invariant: every file an .envrc loads with direnv's stdlib or bash's source is found, in the
// spellings .envrc files use, and what cannot be known (another variable, a substitution) is left
// out rather than guessed.
import { describe, expect, it } from 'vitest';
import { envrcLoads, envrcPathDirs } from './direnv.js';

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

describe('what an .envrc puts on PATH', () => {
  const pathDirs = (text: string) => envrcPathDirs('/w/.envrc', text, '/home/u').sort();

  it('PATH_add (several), path_add PATH, PATH= and export PATH= parts, layout node', () => {
    expect(
      pathDirs(
        [
          'PATH_add bin scripts',
          'path_add PATH ./tools/bin',
          'export PATH="$PWD/node_bin:$PATH"',
          'PATH=${HOME}/.local/bin:${PATH}',
          'if has nix; then PATH_add "sub dir"; fi',
          '  layout node',
        ].join('\n'),
      ),
    ).toEqual([
      '/home/u/.local/bin',
      '/w/bin',
      '/w/node_bin',
      '/w/node_modules/.bin',
      '/w/scripts',
      '/w/sub dir',
      '/w/tools/bin',
    ]);
  });

  it('parts it cannot know, comments, other variables and other layouts are left out', () => {
    expect(
      pathDirs(
        [
          'PATH_add $OTHER/bin',
          'PATH_add $(pwd)/x',
          '# PATH_add commented',
          'path_add MANPATH man',
          'export GOPATH=$PWD/go',
          'layout python3',
          'echo PATH_add not-a-call',
        ].join('\n'),
      ),
    ).toEqual([]);
  });
});
