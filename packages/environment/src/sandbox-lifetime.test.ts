// Invariant: through the real tools (cli, a background task, a terminal session), a protection holds
// for the sandbox's whole life whatever the host does to the files meanwhile, what a command leaves
// for the user's own tools is refused or reported in the same call's result (and the user's trigger
// run on the host proves which), conch's own config written inside never takes effect, and nothing
// inside reaches the supervisor or the keyring.
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ToolResult } from '@conch/core';
import { findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { guardAvailability } from '@conch/sandbox';
import { programRuns, requireUnderCi } from '@conch/test-support';
import { terminalPlugin } from '@conch/terminal';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from '@conch/permission';

const ready = findBwrap() !== undefined && guardAvailability().available;
const maybe = ready ? describe : describe.skip;
if (!ready && process.env.CI) throw new Error('CI needs bubblewrap and the sandbox guard for these tests');

type Result = ToolResult & Record<string, any>;

let ws: string;
let home: string;
let scratch: string;
const registries: PluginRegistry[] = [];
const realHome = process.env.HOME;

beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-lifetime-')));
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-lifetime-home-')));
  scratch = realpathSync(mkdtempSync(join(tmpdir(), 'conch-lifetime-scratch-')));
  process.env.HOME = home;
  git(ws, 'init', '-q');
});
afterEach(async () => {
  for (const registry of registries.splice(0)) {
    const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
    await registry.dispose();
    if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
  }
  for (const d of [ws, home, scratch]) rmSync(d, { recursive: true, force: true });
  process.env.HOME = realHome;
});

const hasHg = requireUnderCi(programRuns('hg'), 'Mercurial (hg)', 'apt-get install mercurial');

const hasDirenv = requireUnderCi(programRuns('direnv', ['version']), 'direnv', 'apt-get install direnv');

/** The user's direnv on the host, its allow list and config in the throwaway HOME. */
function direnv(cwd: string, ...args: string[]): string {
  return execFileSync('direnv', args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      HOME: home,
      XDG_CONFIG_HOME: join(home, '.config'),
      XDG_DATA_HOME: join(home, '.local', 'share'),
      XDG_CACHE_HOME: join(home, '.cache'),
    },
  });
}

/** The user's hg on the host, with no system config and the throwaway HOME. */
function hg(cwd: string, ...args: string[]): string {
  return execFileSync('hg', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, HGRCPATH: join(home, '.hgrc'), HOME: home },
  });
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.email=u@example.com', '-c', 'user.name=u', ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: home },
  });
}

async function makeRegistry(tools: ('terminal' | 'background')[] = []): Promise<PluginRegistry> {
  const registry = new PluginRegistry({
    cwd: ws,
    plugins: [permissionPlugin, cliPlugin, backgroundPlugin, terminalPlugin],
  });
  registries.push(registry);
  await registry.exposeTool('permission', {});
  await registry.exposeTool('cli', {});
  if (tools.includes('terminal')) await registry.exposeTool('terminal', {});
  return registry;
}

async function cli(
  registry: PluginRegistry,
  command: string,
  more: Record<string, unknown> = {},
): Promise<Result> {
  const result = (await registry.execute('cli_based_tool', { command, ...more })) as Result;
  // A command estimated slow (git clone) continues as a task: its final result is the call's.
  if (result.background_task_id && !more.background) return finished(registry, result.background_task_id);
  return result;
}

async function finished(registry: PluginRegistry, taskId: string): Promise<Result> {
  for (;;) {
    const r = (await registry.execute('check_background_task', {
      task_id: taskId,
      wait_seconds: 300,
    })) as Result;
    if (r.status !== 'running' && r.status !== 'queued') return (r.result as Result | undefined) ?? r;
  }
}

type Method = 'rename-over' | 'unlink-recreate' | 'rewrite-in-place' | 'symlink-swap' | 'dir-renamed';

function replace(file: string, text: string, method: Method): void {
  switch (method) {
    case 'rename-over':
      writeFileSync(`${file}.tmp-host`, text);
      renameSync(`${file}.tmp-host`, file);
      return;
    case 'unlink-recreate':
      rmSync(file, { force: true });
      writeFileSync(file, text);
      return;
    case 'rewrite-in-place':
      writeFileSync(file, text);
      return;
    case 'symlink-swap': {
      const target = join(scratch, `t-${Math.random().toString(36).slice(2)}`);
      writeFileSync(target, text);
      symlinkSync(target, `${file}.link-host`);
      renameSync(`${file}.link-host`, file);
      return;
    }
    case 'dir-renamed': {
      const parent = join(file, '..');
      const name = file.slice(parent.length + 1);
      renameSync(parent, `${parent}.away`);
      writeFileSync(join(`${parent}.away`, name), text);
      renameSync(`${parent}.away`, parent);
      return;
    }
  }
}

/** A sandboxed loop that appends to the protected files and reads the secret ones until `stop` exists. */
function hammer(name: string, writes: string[], reads: string[], stop: string): string {
  const file = join(ws, `${name}.py`);
  writeFileSync(
    file,
    `import os, json
writes = ${JSON.stringify(writes)}
reads = ${JSON.stringify(reads)}
wrote = leaked = tries = 0
open(${JSON.stringify(join(ws, `${name}.started`))}, 'w').close()
while not os.path.exists(${JSON.stringify(stop)}):
    tries += 1
    for p in writes:
        try:
            fd = os.open(p, os.O_WRONLY | os.O_APPEND)
            try:
                wrote += os.write(fd, b'[core]\\n\\tfsmonitor = planted\\n')
            finally:
                os.close(fd)
        except OSError:
            pass
    for p in reads:
        try:
            with open(p, 'rb') as f:
                if b'SECRET' in f.read():
                    leaked += 1
        except OSError:
            pass
print('RESULT ' + json.dumps({'wrote': wrote, 'leaked': leaked, 'tries': tries}))
`,
  );
  return `python3 ${file}`;
}

async function until(predicate: () => boolean, what: string): Promise<void> {
  // Waits on the condition itself; the bound only turns a hang into a failure with a name.
  for (let i = 0; i < 6000 && !predicate(); i++) await new Promise((r) => setTimeout(r, 20));
  if (!predicate()) throw new Error(`never happened: ${what}`);
}

maybe('protections hold while the host changes the files, for tasks and terminal sessions', () => {
  it(
    'every method, 1,000 replacements each: a background task and a terminal session write 0 bytes and read 0 secret bytes',
    { timeout: 20 * 60_000 },
    async () => {
      mkdirSync(join(ws, 'app'));
      const files = {
        config: join(ws, '.git', 'config'),
        env: join(ws, '.env'),
        nested: join(ws, 'app', '.env.local'),
        npmrc: join(home, '.npmrc'),
      };
      writeFileSync(files.env, 'SECRET=start\n');
      writeFileSync(files.nested, 'SECRET=start\n');
      writeFileSync(files.npmrc, '//registry.npmjs.org/:_authToken=SECRET-start\n');
      const registry = await makeRegistry(['terminal']);
      const stop = join(ws, 'stop');
      const writes = [files.config];
      const reads = [files.env, files.nested, files.npmrc];
      const task = await cli(registry, hammer('task', writes, reads, stop), { background: true });
      expect(task.background_task_id, JSON.stringify(task)).toBeDefined();
      const term = (await registry.execute('terminal', {
        command: hammer('term', writes, reads, stop),
        background: true,
      })) as Result;
      expect(term.session_id, JSON.stringify(term)).toBeDefined();
      await until(
        () => existsSync(join(ws, 'task.started')) && existsSync(join(ws, 'term.started')),
        'both loops started',
      );
      for (const method of [
        'rename-over',
        'unlink-recreate',
        'rewrite-in-place',
        'symlink-swap',
        'dir-renamed',
      ] as const) {
        for (let round = 0; round < 1000; round++) {
          const secret = `SECRET=${method}-${round}\n`;
          // the user's own git rewrites its config by renaming config.lock over it
          if (method === 'rename-over') git(ws, 'config', 'user.name', `u${round % 7}`);
          else replace(files.config, readFileSync(files.config, 'utf8'), method);
          replace(files.env, secret, method);
          replace(files.nested, secret, method);
          replace(files.npmrc, `//registry.npmjs.org/:_authToken=${secret}`, method);
          if (round % 20 === 0) await new Promise((r) => setImmediate(r));
        }
      }
      writeFileSync(stop, '');
      const taskDone = await finished(registry, task.background_task_id);
      const termDone = (await registry.execute('terminal', {
        session_id: term.session_id,
        input: '',
        wait_for: 'RESULT',
        timeout: 300,
      })) as Result;
      for (const [who, text] of [
        ['task', JSON.stringify(taskDone)],
        ['terminal', JSON.stringify(termDone)],
      ] as const) {
        const m = /RESULT (\{[^}]*\})/.exec(text.replace(/\\"/g, '"'));
        expect(m, `${who}: ${text.slice(0, 500)}`).not.toBeNull();
        const counts = JSON.parse(m![1]!) as { wrote: number; leaked: number; tries: number };
        expect(counts.tries, who).toBeGreaterThan(0);
        expect({ who, wrote: counts.wrote, leaked: counts.leaked }).toEqual({ who, wrote: 0, leaked: 0 });
      }
      expect(readFileSync(files.config, 'utf8')).not.toContain('planted');
    },
  );
});

maybe('plants are refused or reported in the call that made them', () => {
  it("a hook or template copied by any spelling is refused; the user's git runs nothing", async () => {
    const registry = await makeRegistry();
    mkdirSync(join(ws, 'tpl', 'hooks'), { recursive: true });
    writeFileSync(join(ws, 'tpl', 'hooks', 'pre-commit'), `#!/bin/sh\ntouch ${scratch}/hook-ran\n`, {
      mode: 0o755,
    });
    const spellings = [
      'git init -q --template=tpl nested1',
      `python3 -c "import os; os.makedirs('.git/hooks', exist_ok=True); open('.git/hooks/pre-commit','w').write('#!/bin/sh\\ntouch ${scratch}/hook-ran\\n'); os.chmod('.git/hooks/pre-commit', 0o755)"`,
      `node -e "require('fs').copyFileSync('tpl/hooks/pre-commit', '.git/hooks/pre-commit')"`,
      `perl -e 'open(my $f, ">", ".git/hooks/post-commit") or die; print $f "#!/bin/sh\\ntouch ${scratch}/hook-ran\\n"'`,
      'cp -a tpl/hooks/pre-commit .git/hooks/pre-merge-commit',
      'tar -C tpl -cf - hooks | tar -C .git -xf -',
    ];
    for (const command of spellings) {
      const r = await cli(registry, command);
      expect(r.error_code, `${command}: ${JSON.stringify(r)}`).toMatch(
        /SANDBOX_REFUSED_WRITE|PERMISSION_DENIED/,
      );
    }
    // the user's trigger, on the host
    writeFileSync(join(ws, 'x.txt'), 'x');
    git(ws, 'add', 'x.txt');
    git(ws, 'commit', '-qm', 'user commit');
    expect(existsSync(join(scratch, 'hook-ran'))).toBe(false);
  });

  it('a repository the agent makes and arms is reported, with the key that would run; the trigger proves it', async () => {
    const registry = await makeRegistry();
    const marker = join(scratch, 'fsmonitor-ran');
    const armed = `#!/bin/sh\ntouch ${marker}\n`;
    writeFileSync(join(ws, 'mon.sh'), armed, { mode: 0o755 });
    const spellings: [string, string][] = [
      [
        'python',
        `python3 -c "import subprocess; subprocess.run(['git','init','-q','py']); open('py/.git/config','a').write('[core]\\n\\tfsmonitor = ${ws}/mon.sh\\n')"`,
      ],
      [
        'script file',
        `printf 'git init -q sh\\nprintf "[alias]\\\\n\\\\tst = !touch ${marker}\\\\n" >> sh/.git/config\\n' > arm.sh && bash arm.sh`,
      ],
      [
        'clone',
        `git clone -q . cloned && node -e "require('fs').appendFileSync('cloned/.git/config', '[core]\\\\n\\\\tsshCommand = ${ws}/mon.sh\\\\n')"`,
      ],
    ];
    for (const [how, command] of spellings) {
      const r = await cli(registry, command);
      expect(r.error_code, `${how}: ${JSON.stringify(r)}`).toBe('PLANT_REPORTED');
      expect(r.plants, how).toEqual(
        expect.arrayContaining([expect.objectContaining({ kind: 'git-config' })]),
      );
    }
    const status = (await registry.status()) as Record<string, any>;
    expect(status.processes.plants.length).toBeGreaterThanOrEqual(3);
    // Reported, not refused: the user's own git would run it, which is why the result says so.
    execFileSync('git', ['-C', join(ws, 'py'), 'status'], { env: { ...process.env, HOME: home } });
    expect(existsSync(marker)).toBe(true);
  });

  it("a bare repository the agent makes and arms is reported; the user's git in it and a push to it prove it", async () => {
    const registry = await makeRegistry();
    const paged = join(scratch, 'pager-ran');
    const received = join(scratch, 'post-receive-ran');
    const armed: [string, string, string][] = [
      [
        'git init --bare, config appended by python',
        `git init -q --bare remote.git && python3 -c "open('remote.git/config','a').write('[core]\\n\\tpager = touch ${paged}\\n')"`,
        'git-config',
      ],
      [
        'made by hand, no git at all',
        `mkdir -p hand/objects hand/refs/heads && echo 'ref: refs/heads/main' > hand/HEAD && printf '[core]\\n\\tbare = true\\n\\tpager = touch ${paged}\\n' > hand/config`,
        'git-config',
      ],
      [
        'a hook, written by python in a repository of another name',
        `mkdir pushed && cd pushed && git init -q --bare && python3 -c "import os; open('hooks/post-receive','w').write('#!/bin/sh\\ntouch ${received}\\n'); os.chmod('hooks/post-receive', 0o755)"`,
        'git-hook',
      ],
      [
        'a hook copied in by node',
        `mkdir -p other && cd other && git init -q --bare && node -e "require('fs').writeFileSync('hooks/update', '#!/bin/sh\\nexit 0\\n', {mode: 0o755})"`,
        'git-hook',
      ],
    ];
    for (const [how, command, kind] of armed) {
      const r = await cli(registry, command);
      expect(r.error_code, `${how}: ${JSON.stringify(r)}`).toBe('PLANT_REPORTED');
      expect(r.plants, how).toEqual(expect.arrayContaining([expect.objectContaining({ kind })]));
    }
    // Where the gate reads the target in the command (`x.git/hooks/…`), it refuses outright.
    const spelled = await cli(
      registry,
      `git init -q --bare seen.git && printf '#!/bin/sh\\n' > seen.git/hooks/post-receive`,
    );
    expect(spelled.error_code, JSON.stringify(spelled)).toBe('PERMISSION_DENIED');
    // A bare repository with nothing armed is ordinary work: no report.
    const plain = await cli(registry, 'git init -q --bare plain.git && git -C plain.git symbolic-ref HEAD');
    expect(plain.error_code, JSON.stringify(plain)).toBeUndefined();
    expect(plain.returncode).toBe(0);
    // Once it exists, the next call's sandbox keeps its config as it is.
    const again = await cli(registry, `printf '[core]\\n\\tpager = true\\n' >> remote.git/config`);
    expect(again.returncode, JSON.stringify(again)).not.toBe(0);
    expect(readFileSync(join(ws, 'remote.git', 'config'), 'utf8')).not.toContain('pager = true');
    // The reports were real: the user's git branch in a terminal starts the pager; a push runs the hook.
    execFileSync('script', ['-qc', 'git branch', '/dev/null'], {
      cwd: join(ws, 'remote.git'),
      env: { ...process.env, HOME: home, GIT_CONFIG_NOSYSTEM: '1', TERM: 'xterm' },
      stdio: 'ignore',
    });
    expect(existsSync(paged)).toBe(true);
    writeFileSync(join(ws, 'x.txt'), 'x\n');
    git(ws, 'add', 'x.txt');
    git(ws, 'commit', '-qm', 'user commit');
    git(ws, 'push', '-q', join(ws, 'pushed'), 'HEAD:refs/heads/main');
    expect(existsSync(received)).toBe(true);
  });

  it.runIf(hasHg)(
    "Mercurial: an existing repository's config is refused in any spelling, an armed new one is reported; the user's hg proves both",
    async () => {
      hg(ws, 'init');
      writeFileSync(join(ws, '.hg', 'hgrc'), '[ui]\nusername = u\n%include ../team.rc\n');
      writeFileSync(join(ws, 'team.rc'), '[ui]\n');
      const marker = join(scratch, 'hg-hook-ran');
      const evil = `[hooks]\npre-status = touch ${marker}\n[extensions]\nevil = ${join(scratch, 'evil.py')}\n`;
      writeFileSync(join(scratch, 'evil.py'), `open(${JSON.stringify(marker)}, 'w').close()\n`);
      mkdirSync(join(ws, 'tpl', 'hg', '.hg'), { recursive: true });
      writeFileSync(join(ws, 'tpl', 'evil.rc'), evil);
      writeFileSync(join(ws, 'tpl', 'hg', '.hg', 'hgrc'), evil);
      const registry = await makeRegistry();
      const spellings = [
        'cat tpl/evil.rc >> .hg/hgrc',
        `python3 -c "open('.hg/hgrc','a').write(open('tpl/evil.rc').read())"`,
        `node -e "require('fs').copyFileSync('tpl/evil.rc', '.hg/hgrc-not-shared')"`,
        'cp tpl/evil.rc x.rc && mv x.rc .hg/hgrc',
        "sed -i '$r tpl/evil.rc' .hg/hgrc",
        'ln -s ../tpl/evil.rc .hg/hgrc-not-shared',
        // the file the config includes
        `perl -e 'open(my $f, ">>", "team.rc") or die; open(my $g, "<", "tpl/evil.rc"); print {$f} <$g>'`,
        // a share pointer to an armed repository, and the .hg directory swapped for another
        `python3 -c "open('.hg/sharedpath','w').write('tpl/hg/.hg')"`,
        `python3 -c "import os; os.rename('.hg', 'hg-old'); os.makedirs('.hg')"`,
        'tar -C tpl/hg -cf - .hg | tar -xf -',
      ];
      for (const command of spellings) {
        const r = await cli(registry, command);
        expect(r.error_code ?? 'none', `${command}: ${JSON.stringify(r)}`).toMatch(
          /SANDBOX_REFUSED_WRITE|PERMISSION_DENIED/,
        );
      }
      // the user's trigger, on the host: hg status runs pre-status hooks and loads extensions
      hg(ws, 'status');
      expect(existsSync(marker)).toBe(false);

      // A repository the agent makes is its own to configure: armed, it is reported in that call.
      const armed = [
        ['sub', `hg init sub && python3 -c "open('sub/.hg/hgrc','w').write(open('tpl/evil.rc').read())"`],
        [
          'cl',
          `hg clone -q . cl && node -e "require('fs').appendFileSync('cl/.hg/hgrc-not-shared', require('fs').readFileSync('tpl/evil.rc'))"`,
        ],
      ] as const;
      for (const [repo, command] of armed) {
        const r = await cli(registry, command);
        expect(r.error_code, `${command}: ${JSON.stringify(r)}`).toBe('PLANT_REPORTED');
        expect(r.plants, repo).toEqual(
          expect.arrayContaining([
            expect.objectContaining({ kind: 'hg-config', detail: expect.stringContaining('pre-status') }),
          ]),
        );
      }
      // Once it exists, the next sandbox protects it like the workspace's own.
      const again = await cli(registry, `python3 -c "open('sub/.hg/hgrc','a').write('[ui]\\n')"`);
      expect(again.error_code ?? 'none', JSON.stringify(again)).toMatch(
        /SANDBOX_REFUSED_WRITE|PERMISSION_DENIED/,
      );
      // Reported, not refused: the user's own hg would run it, which is why the result says so.
      hg(join(ws, 'sub'), 'status');
      expect(existsSync(marker)).toBe(true);
    },
  );

  it.runIf(hasDirenv)(
    "direnv: what the user's .envrc loads is refused in any spelling, also once the user adds a load; the user's next cd runs nothing",
    async () => {
      const marker = join(scratch, 'direnv-ran');
      mkdirSync(join(ws, 'scripts'));
      mkdirSync(join(ws, 'config'));
      writeFileSync(join(ws, 'scripts', 'env.sh'), 'export FROM_SCRIPT=1\n');
      writeFileSync(
        join(ws, '.envrc'),
        'source_env_if_exists .envrc.local\nsource_env scripts/env.sh\ndotenv_if_exists config/dev.vars\n',
      );
      writeFileSync(join(ws, 'tpl.sh'), `touch ${marker}\n`);
      direnv(ws, 'allow', '.');
      const registry = await makeRegistry();
      const spellings = [
        'cp tpl.sh .envrc.local',
        `python3 -c "open('.envrc.local','w').write(open('tpl.sh').read())"`,
        'cat tpl.sh >> scripts/env.sh',
        `node -e "require('fs').appendFileSync('scripts/env.sh', require('fs').readFileSync('tpl.sh'))"`,
        "sed -i '$r tpl.sh' scripts/env.sh",
        `perl -e 'open(my $f, ">", "config/dev.vars") or die; print {$f} "PROMPT_COMMAND=touch ${marker}\\n"'`,
        'mv scripts scripts-old && mkdir scripts && cp tpl.sh scripts/env.sh',
        'ln -s tpl.sh .envrc.local',
      ];
      for (const command of spellings) {
        const r = await cli(registry, command);
        expect(r.error_code ?? 'none', `${command}: ${JSON.stringify(r)}`).toMatch(
          /SANDBOX_REFUSED_WRITE|PERMISSION_DENIED/,
        );
      }
      // The user edits the .envrc in place while the sandbox lives, and allows it again.
      writeFileSync(join(ws, '.envrc'), 'source_env_if_exists later.sh\n', { flag: 'a' });
      direnv(ws, 'allow', '.');
      const later = await cli(registry, `python3 -c "open('later.sh','w').write(open('tpl.sh').read())"`);
      expect(later.error_code ?? 'none', JSON.stringify(later)).toMatch(
        /SANDBOX_REFUSED_WRITE|PERMISSION_DENIED/,
      );
      // the user's next cd, on the host
      expect(direnv(ws, 'exec', ws, 'sh', '-c', 'echo $FROM_SCRIPT')).toBe('1\n');
      expect(existsSync(marker)).toBe(false);
    },
  );

  it("history that would check out a protected file is reported; the user's checkout proves it", async () => {
    const registry = await makeRegistry();
    writeFileSync(join(ws, 'readme.md'), 'hi\n');
    git(ws, 'add', 'readme.md');
    git(ws, 'commit', '-qm', 'base');
    const r = await cli(
      registry,
      [
        `blob=$(printf 'touch ${scratch}/envrc-ran\\n' | git hash-object -w --stdin)`,
        'git update-index --add --cacheinfo 100644,$blob,.envrc',
        // A name the guard protects by its ending: VS Code runs its folderOpen tasks.
        'git update-index --add --cacheinfo 100644,$blob,tools/dev.code-workspace',
        'git -c user.email=a@b -c user.name=a commit -qm "docs"',
      ].join(' && '),
    );
    expect(r.error_code, JSON.stringify(r)).toBe('PLANT_REPORTED');
    expect(r.plants).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'git-history', path: join(ws, '.envrc') }),
        expect.objectContaining({ kind: 'git-history', path: join(ws, 'tools', 'dev.code-workspace') }),
      ]),
    );
    expect(existsSync(join(ws, '.envrc'))).toBe(false);
    git(ws, 'checkout', 'HEAD', '--', '.');
    expect(existsSync(join(ws, '.envrc'))).toBe(true);
  });

  it('package-manager and python plants are reported; python3 -m pip on the host proves the shadow', async () => {
    const registry = await makeRegistry();
    const marker = join(scratch, 'pip-shadow-ran');
    const cases: [string, string][] = [
      ['python-shadow', `python3 -c "open('pip.py','w').write('open(\\'${marker}\\',\\'w\\')\\n')"`],
      ['yarn', `node -e "require('fs').writeFileSync('.yarnrc.yml', 'yarnPath: ./.yarn/evil.cjs\\n')"`],
      ['pnpmfile', `printf 'module.exports = {}\\n' > .pnpmfile.cjs`],
      ['npmrc', `printf 'script-shell=./evil.sh\\n' > .npmrc`],
    ];
    for (const [kind, command] of cases) {
      const r = await cli(registry, command);
      expect(r.error_code, `${kind}: ${JSON.stringify(r)}`).toBe('PLANT_REPORTED');
      expect(r.plants, kind).toEqual(expect.arrayContaining([expect.objectContaining({ kind })]));
    }
    execFileSync('python3', ['-m', 'pip', '--version'], { cwd: ws, stdio: 'ignore' });
    expect(existsSync(marker)).toBe(true);
  });

  it("a program named like git or ssh in a directory the user's shell puts on PATH is reported; the user's shell proves it", async () => {
    const marker = (name: string) => join(scratch, `shadow-${name}`);
    const plant = (name: string) => `#!/bin/sh\\ntouch ${marker(name)}\\n`;
    // The user's project: a .envrc direnv allows (PATH_add bin), a tools/bin on the user's PATH.
    writeFileSync(join(ws, '.envrc'), 'PATH_add bin\n');
    mkdirSync(join(ws, 'tools', 'bin'), { recursive: true });
    const savedPath = process.env.PATH;
    process.env.PATH = `${join(ws, 'tools', 'bin')}:${savedPath}`;
    try {
      const registry = await makeRegistry();
      const reported: [string, string][] = [
        [
          'a venv made by hand, printf and chmod',
          `mkdir -p .venv/bin && printf 'home = /usr/bin\\n' > .venv/pyvenv.cfg && printf '${plant('git')}' > .venv/bin/git && chmod +x .venv/bin/git`,
        ],
        [
          "python into direnv's PATH_add bin",
          `mkdir -p bin && python3 -c "import os; open('bin/ssh','w').write('${plant('ssh')}'); os.chmod('bin/ssh', 0o755)"`,
        ],
        [
          'node into a directory on the host PATH',
          `node -e "require('fs').writeFileSync('tools/bin/sudo', '${plant('sudo')}', { mode: 0o755 })"`,
        ],
        [
          "a link in another venv's bin to a script",
          `mkdir -p env2/bin && touch env2/pyvenv.cfg && printf '${plant('curl')}' > evil.sh && chmod +x evil.sh && ln -s ../../evil.sh env2/bin/curl`,
        ],
      ];
      for (const [how, command] of reported) {
        const r = await cli(registry, command);
        expect(r.error_code, `${how}: ${JSON.stringify(r)}`).toBe('PLANT_REPORTED');
        expect(r.plants, how).toEqual(
          expect.arrayContaining([expect.objectContaining({ kind: 'path-shadow' })]),
        );
      }
      // Written in one call, made executable in the next: reported when it becomes a program.
      const written = await cli(registry, `printf '${plant('make')}' > bin/make`);
      expect(written.error_code, JSON.stringify(written)).toBeUndefined();
      const chmodded = await cli(registry, 'chmod 755 bin/make');
      expect(chmodded.error_code, JSON.stringify(chmodded)).toBe('PLANT_REPORTED');
      expect(chmodded.plants).toEqual([
        expect.objectContaining({ kind: 'path-shadow', path: join(ws, 'bin', 'make') }),
      ]);
      // Ordinary work: a venv's link to the host's git, a git script outside any PATH directory,
      // a venv's own pytest.
      const ordinary = await cli(
        registry,
        'ln -s "$(command -v git)" .venv/bin/git-link && ln -sf "$(command -v git)" env2/bin/git && mkdir -p scripts && printf "#!/bin/sh\\n" > scripts/git && chmod +x scripts/git && printf "#!/bin/sh\\n" > .venv/bin/pytest && chmod +x .venv/bin/pytest',
      );
      expect(ordinary.error_code, JSON.stringify(ordinary)).toBeUndefined();
      expect(ordinary.returncode).toBe(0);
      // The reports were real: the user's shell with the venv active, with the host PATH, and
      // direnv's PATH_add run the agent's programs.
      const shell = (line: string, path: string) =>
        spawnSync('sh', ['-c', line], {
          cwd: ws,
          env: { ...process.env, HOME: home, PATH: path },
          stdio: 'ignore',
        });
      shell('git --version', `${join(ws, '.venv', 'bin')}:${savedPath}`);
      shell('sudo -n true', process.env.PATH!);
      shell('curl --version', `${join(ws, 'env2', 'bin')}:${savedPath}`);
      expect(existsSync(marker('git'))).toBe(true);
      expect(existsSync(marker('sudo'))).toBe(true);
      expect(existsSync(marker('curl'))).toBe(true);
      if (hasDirenv) {
        direnv(ws, 'allow', '.');
        direnv(ws, 'exec', ws, 'sh', '-c', 'ssh -V; make -v; true');
        expect(existsSync(marker('ssh'))).toBe(true);
        expect(existsSync(marker('make'))).toBe(true);
      }
    } finally {
      process.env.PATH = savedPath;
    }
  });

  it("conch's own config cannot be written from inside, in any spelling", async () => {
    const registry = await makeRegistry();
    for (const command of [
      `python3 -c "open('conch.config.json','w').write('{}')"`,
      `node -e "require('fs').writeFileSync('sub/conch.config.json', '{}')"`,
      `printf '{}' > tmp.json && mv tmp.json conch.config.json`,
    ]) {
      mkdirSync(join(ws, 'sub'), { recursive: true });
      const r = await cli(registry, command);
      expect(r.error_code, `${command}: ${JSON.stringify(r)}`).toMatch(
        /SANDBOX_REFUSED_WRITE|PERMISSION_DENIED/,
      );
    }
    expect(existsSync(join(ws, 'conch.config.json'))).toBe(false);
    expect(existsSync(join(ws, 'sub', 'conch.config.json'))).toBe(false);
  });
});

maybe('the supervisor and the host are out of reach', () => {
  it('a command cannot trace, read or take the fds of its supervisor, and the keyring is closed', async () => {
    const registry = await makeRegistry();
    writeFileSync(
      join(ws, 'reach.py'),
      `import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
sup = os.getppid()
X = os.uname().machine == 'x86_64'
out = {}
def sc(name, nr, *args):
    r = libc.syscall(nr, *args)
    out[name] = 0 if r >= 0 else ctypes.get_errno()
sc('ptrace_attach', 101 if X else 117, 16, sup, 0, 0)
sc('ptrace_seize', 101 if X else 117, 0x4206, sup, 0, 0)
sc('pidfd_open', 434, sup, 0)
sc('keyctl_session', 250 if X else 219, 0, -3, 0)
sc('keyctl_user', 250 if X else 219, 0, -4, 0)
for entry in ('mem', 'environ', 'fd/3', 'maps'):
    try:
        open('/proc/%d/%s' % (sup, entry), 'rb').read(1); out[entry] = 0
    except OSError as e:
        out[entry] = e.errno
print(json.dumps(out))
`,
    );
    const r = await cli(registry, 'python3 reach.py');
    const out = JSON.parse(String(r.stdout).trim().split('\n').pop() ?? '{}') as Record<string, number>;
    expect(Object.keys(out).length, JSON.stringify(r)).toBeGreaterThan(5);
    for (const [key, errno] of Object.entries(out))
      expect(errno, `${key} ${JSON.stringify(out)}`).not.toBe(0);
    // and the next call still gets its own, unforged result
    const next = await cli(registry, 'echo still-here');
    expect(next.stdout).toBe('still-here\n');
  });
});
