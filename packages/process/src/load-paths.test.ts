// Invariant: a variable that tells programs where to load code from (the loader's libraries,
// interpreters' module paths, a shell's or git's start-up file) keeps no entry a sandboxed command
// could have written when what it starts runs outside the sandbox — the supervisor itself included.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireUnderCi } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyEnvChanges, envForOutside, loaderEnvOutside } from './load-paths.js';
import { ProcessManager } from './process-manager.js';

let ws: string;
let other: string;
beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-load-ws-')));
  other = realpathSync(mkdtempSync(join(tmpdir(), 'conch-load-other-')));
});
afterEach(() => {
  for (const d of [ws, other]) rmSync(d, { recursive: true, force: true });
});

describe('loaderEnvOutside', () => {
  it('keeps entries outside the roots, drops those inside (also through a symlink), relative and empty ones', () => {
    symlinkSync(ws, join(other, 'link'));
    const env = {
      LD_LIBRARY_PATH: `/usr/lib:${ws}/build/lib::${other}/link/x:lib`,
      PYTHONPATH: `${ws}/src`,
      NODE_PATH: '/opt/node_modules',
      PERL5LIB: `.:/usr/share/perl5`,
      LD_PRELOAD: `/usr/lib/libfaketime.so.1 ${ws}/pre.so`,
      BASH_ENV: `${ws}/env.sh`,
      GIT_CONFIG_GLOBAL: 'gitconfig',
      ZDOTDIR: '/etc/zsh-user',
      UNRELATED: `${ws}/x`,
    };
    const { changes, dropped } = loaderEnvOutside(env, [ws]);
    expect(changes).toEqual({
      LD_LIBRARY_PATH: '/usr/lib',
      LD_PRELOAD: '/usr/lib/libfaketime.so.1',
      PYTHONPATH: undefined,
      PERL5LIB: '/usr/share/perl5',
      BASH_ENV: undefined,
      GIT_CONFIG_GLOBAL: undefined,
    });
    expect(dropped).toEqual(
      expect.arrayContaining([
        { name: 'LD_LIBRARY_PATH', entries: [`${ws}/build/lib`, `${other}/link/x`, 'lib', ''] },
        { name: 'PYTHONPATH', entries: [`${ws}/src`] },
        { name: 'BASH_ENV', entries: [`${ws}/env.sh`] },
      ]),
    );
    expect(dropped.map((d) => d.name)).not.toContain('UNRELATED');
  });

  it("reads the host's value where the command's env does not set one, and an unset one stays unset", () => {
    const saved = process.env.RUBYLIB;
    process.env.RUBYLIB = `${ws}/lib:/usr/lib/ruby`;
    try {
      expect(loaderEnvOutside({}, [ws]).changes).toEqual({ RUBYLIB: '/usr/lib/ruby' });
      // The command's own env wins: it set RUBYLIB, or unset it (undefined).
      expect(loaderEnvOutside({ RUBYLIB: '/opt/r' }, [ws]).changes).toEqual({});
      expect(loaderEnvOutside({ RUBYLIB: undefined }, [ws]).changes).toEqual({});
    } finally {
      if (saved === undefined) delete process.env.RUBYLIB;
      else process.env.RUBYLIB = saved;
    }
    expect(loaderEnvOutside({ PATH: `${ws}/bin`, HOME: ws }, [ws])).toEqual({ changes: {}, dropped: [] });
  });
});

describe('options and command lines outside the sandbox', () => {
  it("drops an option naming code a sandboxed command could have written, with its value, and keeps the user's others", () => {
    const { changes, dropped } = loaderEnvOutside(
      {
        NODE_OPTIONS: `--max-old-space-size=4096 --require ${ws}/trace.js -r ./local.js --import=dotenv/config --import node:fs --require ${other}/ok.js --import file://${ws}/x.mjs --env-file=.env --experimental-default-config-file --inspect`,
        RUBYOPT: `-w -rjson -r./evil -I ${ws}/lib -Ilib -rbundler/setup -W:no-deprecated`,
        PERL5OPT: `-Mstrict -Mlib=${ws}/pl,/usr/share/perl5 -I ${other}/perl -Ilocal -d:Trace`,
        JAVA_TOOL_OPTIONS: `-Xmx1g -javaagent:${ws}/a.jar=opt -javaagent:${other}/ok.jar -Djava.library.path=/usr/lib:lib -Dfile.encoding=UTF-8 "-Dtitle=a b"`,
        JDK_JAVA_OPTIONS: `-cp ${ws}/c.jar -XX:OnError=${ws}/h.sh @args.txt -Xbootclasspath/a:${ws}/b.jar`,
      },
      [ws],
    );
    expect(changes).toEqual({
      NODE_OPTIONS: `--max-old-space-size=4096 --import node:fs --require ${other}/ok.js --inspect`,
      RUBYOPT: '-w -rjson -W:no-deprecated',
      PERL5OPT: `-Mstrict -I ${other}/perl -d:Trace`,
      JAVA_TOOL_OPTIONS: `-Xmx1g -javaagent:${other}/ok.jar -Dfile.encoding=UTF-8 "-Dtitle=a b"`,
      JDK_JAVA_OPTIONS: undefined,
    });
    expect(dropped.find((d) => d.name === 'NODE_OPTIONS')?.entries).toEqual([
      '--require',
      `${ws}/trace.js`,
      '-r',
      './local.js',
      '--import=dotenv/config',
      '--import',
      `file://${ws}/x.mjs`,
      '--env-file=.env',
      '--experimental-default-config-file',
    ]);
    expect(dropped.find((d) => d.name === 'RUBYOPT')?.entries).toEqual([
      '-r./evil',
      '-I',
      `${ws}/lib`,
      '-Ilib',
      '-rbundler/setup',
    ]);
  });

  it('unsets a command line that names such a path, and keeps one that names programs and options only', () => {
    const judged = (value: string, home = other) => {
      const saved = process.env.HOME;
      process.env.HOME = home;
      try {
        return loaderEnvOutside({ GIT_SSH_COMMAND: value }, [ws]).changes;
      } finally {
        process.env.HOME = saved;
      }
    };
    for (const value of [
      'ssh -F ssh_config',
      `ssh -F ${ws}/conf/ssh_config`,
      'ssh -o ProxyCommand=./proxy',
      `${ws}/bin/ssh-wrapper`,
      'vim -u .vimrc',
      'history -a; source ./hook.sh',
      `| ${ws}/lesspipe %s`,
    ])
      expect(judged(value), value).toEqual({ GIT_SSH_COMMAND: undefined });
    // ~ is the home: outside the workspace here, inside it when the home is the workspace.
    expect(judged('ssh -i ~/.ssh/id_work -o IdentitiesOnly=yes')).toEqual({});
    expect(judged('ssh -i ~/.ssh/id_work', ws)).toEqual({ GIT_SSH_COMMAND: undefined });
    for (const value of [
      'ssh -o StrictHostKeyChecking=no -p 2222',
      'code --wait',
      'less -FRX',
      '| /usr/bin/lesspipe %s',
      'history -a; history -n',
      'ssh -o ProxyCommand=/usr/bin/nc',
    ])
      expect(judged(value), value).toEqual({});
    const all = loaderEnvOutside(
      {
        GIT_ASKPASS: `${ws}/ask`,
        EDITOR: 'vim',
        PAGER: 'less -R',
        LESSOPEN: 'lesspipe.sh %s',
        PROMPT_COMMAND: '. .envrc',
      },
      [ws],
    );
    expect(all.changes).toEqual({ GIT_ASKPASS: undefined, PROMPT_COMMAND: undefined });
  });
});

describe('envForOutside', () => {
  it('cleans PATH, load lists, options and command lines in one set of changes', () => {
    const env = {
      PATH: `${ws}/.venv/bin:/usr/bin:bin:/bin`,
      PYTHONPATH: `${ws}/src`,
      NODE_OPTIONS: `--max-old-space-size=4096 --require ${ws}/hook.js`,
      GIT_SSH_COMMAND: `ssh -F ${ws}/ssh_config`,
      LANG: 'C.UTF-8',
    };
    const { changes, dropped } = envForOutside(env, [ws], {});
    expect(changes).toEqual({
      PATH: '/usr/bin:/bin',
      PYTHONPATH: undefined,
      NODE_OPTIONS: '--max-old-space-size=4096',
      GIT_SSH_COMMAND: undefined,
    });
    expect(dropped.path).toEqual([`${ws}/.venv/bin`, 'bin']);
    expect(dropped.loaders.map((d) => d.name).sort()).toEqual([
      'GIT_SSH_COMMAND',
      'NODE_OPTIONS',
      'PYTHONPATH',
    ]);
    // Applied: the variables left with nothing are gone, the others kept.
    expect(applyEnvChanges(env, changes)).toEqual({
      PATH: '/usr/bin:/bin',
      NODE_OPTIONS: '--max-old-space-size=4096',
      LANG: 'C.UTF-8',
    });
  });

  it("reads a variable the env lacks from the base (the host's by default), and from nowhere with an empty base", () => {
    const base = { PATH: `/usr/bin:${other}/bin`, PERL5LIB: `${other}/perl:/usr/share/perl5` };
    expect(envForOutside({}, [other], base).changes).toEqual({
      PATH: '/usr/bin',
      PERL5LIB: '/usr/share/perl5',
    });
    // A whole environment (a terminal session's): what it lacks is not added back from the host.
    expect(envForOutside({ HOME: ws }, [other], {}).changes).toEqual({});
    // Nothing to leave out: no changes, nothing dropped.
    expect(envForOutside({ PATH: '/usr/bin:/bin' }, [ws], {})).toEqual({
      changes: {},
      dropped: { path: [], loaders: [] },
    });
  });
});

const cc = ['cc', 'gcc'].find((c) => spawnSync(c, ['--version']).status === 0);
const hasCc = requireUnderCi(cc !== undefined, 'a C compiler', 'apt-get install gcc');

describe.runIf(hasCc)("the supervisor's own environment", () => {
  const saved = { LD_PRELOAD: process.env.LD_PRELOAD, LD_LIBRARY_PATH: process.env.LD_LIBRARY_PATH };
  afterEach(() => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  });

  it.each([
    [
      'LD_PRELOAD naming a library in the workspace',
      (lib: string) => ({ LD_PRELOAD: join(lib, 'libpre.so') }),
    ],
    [
      'LD_PRELOAD reaching it through a symlink from elsewhere',
      (lib: string) => {
        symlinkSync(lib, join(other, 'tools'));
        return { LD_PRELOAD: join(other, 'tools', 'libpre.so') };
      },
    ],
    [
      'LD_PRELOAD by name, found on an LD_LIBRARY_PATH that starts in the workspace',
      (lib: string) => ({ LD_PRELOAD: 'libpre.so', LD_LIBRARY_PATH: `${lib}:/usr/lib` }),
    ],
  ] as const)('%s: a supervisor started after the library appeared does not load it', async (_name, vars) => {
    // A library that marks which program loaded it: node (the supervisor) or anything else.
    const marker = join(other, 'loaded-by-');
    writeFileSync(
      join(ws, 'pre.c'),
      `#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\n#include <fcntl.h>\n` +
        `__attribute__((constructor)) static void mark(void) {\n` +
        `  char exe[4096] = {0}; readlink("/proc/self/exe", exe, sizeof exe - 1);\n` +
        `  const char *base = strrchr(exe, '/'); base = base ? base + 1 : exe;\n` +
        `  char path[8192]; snprintf(path, sizeof path, "${marker}%s", strstr(base, "node") ? "node" : "other");\n` +
        `  close(open(path, O_CREAT | O_WRONLY, 0644));\n}\n`,
    );
    const lib = join(ws, 'lib');
    mkdirSync(lib);
    execFileSync(cc!, ['-shared', '-fPIC', '-o', join(lib, 'libpre.so'), join(ws, 'pre.c')]);
    Object.assign(process.env, vars(lib));
    // The control: a program started with this environment loads it.
    spawnSync('/bin/true', [], { env: process.env });
    expect(existsSync(`${marker}other`), 'the planted library loads where the variable applies').toBe(true);
    const manager = new ProcessManager({ cwd: ws });
    try {
      const r = await manager.spawn('/bin/true', [], {
        env: { LD_PRELOAD: undefined, LD_LIBRARY_PATH: undefined },
      }).result;
      expect(r.exitCode, JSON.stringify(r)).toBe(0);
      expect(existsSync(`${marker}node`), 'the supervisor (node) loaded the library').toBe(false);
    } finally {
      await manager.dispose();
    }
  });
});
