// The model's file tools in a remote target write only inside the target's workspace (and the roots the host allows), never its protected names — judged in the target, with the target's HOME and workspace, on real paths there, at the write itself: each refusal leaves its marker nowhere on the target.
import 'reflect-metadata';
import { PluginRegistry, type PermissionRequest, type ToolResult } from '@conch/core';
import { filesPlugin, isFileOperationError } from '@conch/files';
import { permissionPlugin } from '@conch/permission';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { RemoteCallError } from './errors/remote-call-error.js';
import { executorFromConfig, type ExecutionTarget } from './execution-target.js';
import { executorPlugin } from './executor-plugin.js';
import { marker } from './test-support/helpers.js';
import { podmanAvailable, startContainer } from './test-support/podman.js';
import { sshdAvailable, sshExecutorConfig, startSshdWithHome } from './test-support/sshd-home.js';
import { EXECUTION_TARGET } from './tokens.js';

/** A started target: its executor config (without `cwd`) and its user's home there. */
interface ConfinedHarness {
  executor: Record<string, unknown>;
  home: string;
  stop(): Promise<void>;
}

/** One write the tools must refuse: the call, the code, the target path its message names. */
interface Refusal {
  name: string;
  tool: 'write_file' | 'edit_file';
  path: string;
  code: 'PROTECTED_PATH' | 'OUTSIDE_WORKING_DIR';
  /** The target path the refusal names (besides the path as given). */
  names: string;
}

type Result = ToolResult & Record<string, unknown>;

function describeConfinement(
  name: string,
  options: { available: boolean; start: () => Promise<ConfinedHarness> },
): void {
  describe.skipIf(!options.available)(name, () => {
    let h: ConfinedHarness;
    /** cwd: the home; runs the fixtures and looks at the target's files with plain commands. */
    let probe: ExecutionTarget;
    /** A workspace below the home, and one that is the home (an ssh login directory, the default). */
    let ws: string;
    let inWorkspace: PluginRegistry;
    let inHome: PluginRegistry;
    const asked: PermissionRequest[] = [];
    const registries: PluginRegistry[] = [];

    /** Runs a script in the target; its stdout. */
    async function sh(script: string): Promise<string> {
      const r = await probe.processes.spawn('sh', ['-c', script]).result;
      if (r.exitCode !== 0) throw new Error(`target: ${script}: exit ${r.exitCode}: ${r.stderr.head}`);
      return r.stdout.head;
    }

    /** A file's content in the target, or undefined when there is none. */
    async function targetFile(path: string): Promise<string | undefined> {
      const out = await sh(`if [ -f '${path}' ]; then printf 1; cat '${path}'; else printf 0; fi`);
      return out.startsWith('1') ? out.slice(1) : undefined;
    }

    /**
     * Files that contain `m` where a write could have gone: the workspace, the home's files and its
     * .config and .ssh, the home's parent (`../`), every server's temp dir. (Not the whole home: a
     * container's is this machine's, toolchains and all.)
     */
    async function carriers(m: string): Promise<string> {
      const home = h.home;
      const trees = [ws, `${home}/.config`, `${home}/.ssh`, ...tempDirs()].map((d) => `'${d}'`).join(' ');
      const parent = home.slice(0, home.lastIndexOf('/')) || '/';
      return sh(
        `{ grep -rlsF -- '${m}' ${trees}; find '${home}' '${parent}' -maxdepth 1 -type f -exec grep -lsF -- '${m}' {} +; } || true`,
      );
    }

    function tempDirs(): string[] {
      return registries
        .map((r) => r.resolve(EXECUTION_TARGET).client?.lastConnection?.init.tempDir)
        .filter((d): d is string => d !== undefined);
    }

    async function registry(cwd: string): Promise<PluginRegistry> {
      const r = new PluginRegistry({
        cwd: process.cwd(),
        plugins: [permissionPlugin, filesPlugin, executorPlugin],
      });
      registries.push(r);
      await r.expose('permission', {
        approve: ({ request }: { request: PermissionRequest }) => {
          asked.push(request);
          return Promise.resolve('once' as const);
        },
      });
      await r.expose('files');
      await r.expose('executor', { ...h.executor, cwd });
      return r;
    }

    const call = (r: PluginRegistry, tool: string, args: Record<string, unknown>) =>
      r.execute(tool, args) as Promise<Result>;

    beforeAll(async () => {
      h = await options.start();
      probe = executorFromConfig({ ...h.executor, cwd: h.home }, { cwd: process.cwd() });
      ws = `${h.home}/project-${process.pid}`;
      const home = h.home;
      await sh(
        [
          `mkdir -p '${ws}/.git/hooks' '${ws}/src' '${home}/.ssh'`,
          `printf '[core]\\n\\tbare = false\\n' > '${ws}/.git/config'`,
          `printf 'export ORIGINAL=1\\n' > '${home}/.bashrc'`,
          `printf 'ssh-ed25519 AAAA original\\n' > '${home}/.ssh/authorized_keys'`,
          `printf 'TOKEN=original\\n' > '${ws}/.env'`,
          // Inside the workspace, leading out of it: to an existing rc file, to the git config
          // (missing: a write would create it), to the home itself.
          `ln -s '${home}/.bashrc' '${ws}/bashrc-link'`,
          `ln -s '${home}/.config/git/config' '${ws}/git-config-link'`,
          `ln -s '${home}' '${ws}/home-link'`,
          // In the home: a link to the git config, judged as what it leads to.
          `ln -s '${home}/.config/git/config' '${home}/git-config-link'`,
        ].join(' && '),
      );
      inWorkspace = await registry(ws);
      inHome = await registry(home);
    });

    afterAll(async () => {
      for (const r of registries) await r.dispose();
      await probe?.dispose();
      await h?.stop();
    });

    const below = (): Refusal[] => {
      const home = h.home;
      return [
        {
          name: '~/.config/git/config',
          tool: 'write_file',
          path: '~/.config/git/config',
          code: 'OUTSIDE_WORKING_DIR',
          names: `${home}/.config/git/config`,
        },
        {
          name: '~/.bashrc',
          tool: 'write_file',
          path: '~/.bashrc',
          code: 'OUTSIDE_WORKING_DIR',
          names: `${home}/.bashrc`,
        },
        {
          name: '~/.ssh/authorized_keys',
          tool: 'write_file',
          path: '~/.ssh/authorized_keys',
          code: 'OUTSIDE_WORKING_DIR',
          names: `${home}/.ssh/authorized_keys`,
        },
        {
          name: 'an absolute path outside the workspace',
          tool: 'write_file',
          path: `${home}/outside.txt`,
          code: 'OUTSIDE_WORKING_DIR',
          names: `${home}/outside.txt`,
        },
        {
          name: '../x escaping the workspace',
          tool: 'write_file',
          path: '../escape.txt',
          code: 'OUTSIDE_WORKING_DIR',
          names: `${home}/escape.txt`,
        },
        {
          name: 'a symlink in the workspace to ~/.bashrc',
          tool: 'write_file',
          path: 'bashrc-link',
          code: 'OUTSIDE_WORKING_DIR',
          names: `it is ${home}/.bashrc`,
        },
        {
          name: 'a directory symlink in the workspace to the home',
          tool: 'write_file',
          path: 'home-link/.profile',
          code: 'OUTSIDE_WORKING_DIR',
          names: `it is ${home}/.profile`,
        },
        {
          name: 'a symlink in the workspace to the (missing) ~/.config/git/config',
          tool: 'write_file',
          path: 'git-config-link',
          code: 'PROTECTED_PATH',
          names: `${home}/.config/git/config is the user's git config`,
        },
        {
          name: '.git/config in the workspace',
          tool: 'write_file',
          path: '.git/config',
          code: 'PROTECTED_PATH',
          names: `${ws}/.git/config`,
        },
        {
          name: '.git/hooks/pre-commit in the workspace',
          tool: 'write_file',
          path: '.git/hooks/pre-commit',
          code: 'PROTECTED_PATH',
          names: `${ws}/.git/hooks/pre-commit`,
        },
        {
          name: '.env in the workspace',
          tool: 'write_file',
          path: '.env',
          code: 'PROTECTED_PATH',
          names: `${ws}/.env`,
        },
        {
          name: 'a new .env.local deeper down',
          tool: 'write_file',
          path: 'src/.env.local',
          code: 'PROTECTED_PATH',
          names: `${ws}/src/.env.local`,
        },
        {
          name: '.vscode/tasks.json',
          tool: 'write_file',
          path: '.vscode/tasks.json',
          code: 'PROTECTED_PATH',
          names: `${ws}/.vscode/tasks.json`,
        },
        {
          name: 'edit_file on .git/config',
          tool: 'edit_file',
          path: '.git/config',
          code: 'PROTECTED_PATH',
          names: `${ws}/.git/config`,
        },
        {
          name: 'edit_file on .env',
          tool: 'edit_file',
          path: '.env',
          code: 'PROTECTED_PATH',
          names: `${ws}/.env`,
        },
        {
          name: 'edit_file through the symlink to ~/.bashrc',
          tool: 'edit_file',
          path: 'bashrc-link',
          code: 'OUTSIDE_WORKING_DIR',
          names: `it is ${home}/.bashrc`,
        },
      ];
    };

    const atHome = (): Refusal[] => {
      const home = h.home;
      return [
        {
          name: "~/.config/git/config (the review's finding)",
          tool: 'write_file',
          path: '~/.config/git/config',
          code: 'PROTECTED_PATH',
          names: `${home}/.config/git/config is the user's git config`,
        },
        {
          name: '.config/git/config, relative',
          tool: 'write_file',
          path: '.config/git/config',
          code: 'PROTECTED_PATH',
          names: `${home}/.config/git/config is the user's git config`,
        },
        {
          name: 'the git config by its absolute path',
          tool: 'write_file',
          path: `${home}/.config/git/ignore`,
          code: 'PROTECTED_PATH',
          names: `${home}/.config/git/ignore is the user's git config`,
        },
        {
          name: '~/.config/fish/config.fish',
          tool: 'write_file',
          path: '~/.config/fish/config.fish',
          code: 'PROTECTED_PATH',
          names: `${home}/.config/fish/config.fish`,
        },
        {
          name: '~/.bashrc',
          tool: 'write_file',
          path: '~/.bashrc',
          code: 'PROTECTED_PATH',
          names: `${home}/.bashrc`,
        },
        {
          name: '~/.ssh/authorized_keys',
          tool: 'write_file',
          path: '~/.ssh/authorized_keys',
          code: 'PROTECTED_PATH',
          names: `${home}/.ssh/authorized_keys`,
        },
        {
          name: 'a symlink in the home to the git config',
          tool: 'write_file',
          path: 'git-config-link',
          code: 'PROTECTED_PATH',
          names: `${home}/.config/git/config is the user's git config`,
        },
        {
          name: '../x escaping the home',
          tool: 'write_file',
          path: '../escape.txt',
          code: 'OUTSIDE_WORKING_DIR',
          names: `${home.slice(0, home.lastIndexOf('/'))}/escape.txt`,
        },
        {
          name: 'edit_file on ~/.bashrc',
          tool: 'edit_file',
          path: '~/.bashrc',
          code: 'PROTECTED_PATH',
          names: `${home}/.bashrc`,
        },
      ];
    };

    async function expectRefused(r: PluginRegistry, cases: Refusal[]): Promise<void> {
      const askedBefore = asked.length;
      for (const c of cases) {
        const m = marker('confined');
        const args =
          c.tool === 'write_file'
            ? { path: c.path, content: `${m}\n` }
            : // Every edit's old_string is in the file it aims at (so only the rule can stop it).
              {
                path: c.path,
                old_string: c.path.includes('bashrc') ? 'ORIGINAL' : c.path === '.env' ? 'original' : 'bare',
                new_string: m,
              };
        const result = await call(r, c.tool, args);
        expect({ case: c.name, code: result.error_code }).toEqual({ case: c.name, code: c.code });
        expect(String(result.error)).toContain(c.names);
        expect(String(result.error)).toMatch(/^Refused: (write|edit) /);
        expect(result.display).toMatch(/^(write|edit) refused: /);
        expect({ case: c.name, carriers: await carriers(m) }).toEqual({ case: c.name, carriers: '' });
      }
      // Refused by the tool's own rules: the human is never asked about them.
      expect(asked.slice(askedBefore)).toEqual([]);
      // What was there is untouched, what was missing is still missing.
      expect(await targetFile(`${h.home}/.bashrc`)).toBe('export ORIGINAL=1\n');
      expect(await targetFile(`${h.home}/.ssh/authorized_keys`)).toBe('ssh-ed25519 AAAA original\n');
      expect(await targetFile(`${ws}/.git/config`)).toBe('[core]\n\tbare = false\n');
      expect(await targetFile(`${ws}/.env`)).toBe('TOKEN=original\n');
      expect(await sh(`ls -A '${h.home}/.config/git' '${h.home}/.config/fish' 2>/dev/null || true`)).toBe('');
      expect(await sh(`ls -A '${ws}/.git/hooks' '${ws}/src'`)).toBe(`${ws}/.git/hooks:\n\n${ws}/src:\n`);
      expect(
        await sh(`ls -d '${h.home}/outside.txt' '${h.home}/escape.txt' '${ws}/.vscode' 2>/dev/null || true`),
      ).toBe('');
    }

    test('a workspace below the home: the home, its rc files, git config and keys, ../, absolute paths, symlinks out, and protected names inside are refused', async () => {
      await expectRefused(inWorkspace, below());
    });

    test("the workspace is the home (an ssh login directory): ~/.config/git/config and the other protected names are refused, judged with the target's home", async () => {
      await expectRefused(inHome, atHome());
    });

    test('ordinary writes inside the workspace still work: create, overwrite, new nested directories, edit', async () => {
      const m = marker('ok');
      const askedBefore = asked.length;
      expect(await call(inWorkspace, 'write_file', { path: 'src/new.txt', content: 'one\n' })).toMatchObject({
        path: 'src/new.txt',
        created: true,
        bytes_written: 4,
      });
      expect(await call(inWorkspace, 'write_file', { path: 'src/new.txt', content: `${m}\n` })).toMatchObject(
        {
          created: false,
        },
      );
      expect(
        await call(inWorkspace, 'write_file', { path: 'a/b/c/deep.txt', content: 'deep\n' }),
      ).toMatchObject({
        path: 'a/b/c/deep.txt',
        created: true,
      });
      expect(
        await call(inWorkspace, 'edit_file', { path: 'src/new.txt', old_string: m, new_string: 'edited' }),
      ).toMatchObject({ replacements: 1, line: 1 });
      // `~/…` is the target's home: inside the workspace when the workspace is the home.
      expect(await call(inHome, 'write_file', { path: '~/notes.txt', content: 'notes\n' })).toMatchObject({
        path: 'notes.txt',
        created: true,
      });
      expect(await targetFile(`${ws}/src/new.txt`)).toBe('edited\n');
      expect(await targetFile(`${ws}/a/b/c/deep.txt`)).toBe('deep\n');
      expect(await targetFile(`${h.home}/notes.txt`)).toBe('notes\n');
      // And they were asked about, as every write is.
      expect(asked.slice(askedBefore).map((a) => (a.kind === 'action' ? a.summary : a.kind))).toEqual([
        'write 4 bytes to src/new.txt',
        `write ${m.length + 1} bytes to src/new.txt`,
        'write 5 bytes to a/b/c/deep.txt',
        expect.stringContaining('edit src/new.txt'),
        'write 6 bytes to ~/notes.txt',
      ]);
    });

    test("the server's temp dir stays readable (output files) but is not writable", async () => {
      const target = inWorkspace.resolve(EXECUTION_TARGET);
      const tempDir = target.client!.lastConnection!.init.tempDir;
      const out = await target.processes.spawn('sh', ['-c', `echo output > '${tempDir}/out.txt'`]).result;
      expect(out.exitCode).toBe(0);
      expect(await call(inWorkspace, 'read_file', { path: `${tempDir}/out.txt` })).toMatchObject({
        content: 'output\n',
      });
      const m = marker('temp');
      const write = await call(inWorkspace, 'write_file', { path: `${tempDir}/x.txt`, content: m });
      expect(write).toMatchObject({ error_code: 'OUTSIDE_WORKING_DIR' });
      expect(String(write.error)).toContain(`${tempDir}/x.txt`);
      expect(await carriers(m)).toBe('');
    });

    test('without any host rule (the executor alone, raw fs.write requests) the target still refuses', async () => {
      // No permission plugin, no files plugin: target.files sends writes unchecked by the host.
      const bare = new PluginRegistry({ cwd: process.cwd(), plugins: [executorPlugin] });
      registries.push(bare);
      await bare.expose('executor', { ...h.executor, cwd: h.home });
      const target = bare.resolve(EXECUTION_TARGET);
      for (const [path, code] of [
        ['~/.config/git/config', 'PROTECTED_PATH'],
        ['.ssh/authorized_keys', 'PROTECTED_PATH'],
        [`${ws}/.env`, 'PROTECTED_PATH'],
        ['../escape.txt', 'OUTSIDE_WORKING_DIR'],
      ] as const) {
        const m = marker('bare');
        const error = await target.files.write(path, m).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(isFileOperationError(error) ? { path, code: error.code } : error).toEqual({ path, code });
        const raw = await target.client!.request('fs.write', { path, content: m, encoding: 'utf8' }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(raw).toBeInstanceOf(RemoteCallError);
        expect((raw as RemoteCallError).code).toBe(code);
        expect(await carriers(m)).toBe('');
      }
    });

    test('checked, then swapped for a symlink to the git config before the write: the write itself is judged in the target', async () => {
      const target = inHome.resolve(EXECUTION_TARGET);
      const client = target.client!;
      const m = marker('swap');
      const swap = `swap-${process.pid}.txt`;
      // The host's check (what file tools do before asking the gate) passes for a plain new file…
      expect(await client.request('fs.resolve', { operation: 'write', path: swap })).toEqual({
        abs: `${h.home}/${swap}`,
        real: `${h.home}/${swap}`,
      });
      // …then the name becomes a link to the git config before the write is sent.
      await sh(`ln -s '${h.home}/.config/git/config' '${h.home}/${swap}'`);
      const raw = await client.request('fs.write', { path: swap, content: m, encoding: 'utf8' }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((raw as RemoteCallError).code).toBe('PROTECTED_PATH');
      expect(await carriers(m)).toBe('');
      expect(await sh(`ls -A '${h.home}/.config/git' 2>/dev/null || true`)).toBe('');
    });
  });
}

describeConfinement('file tools on an ssh target (real sshd, a throwaway remote HOME)', {
  available: sshdAvailable(),
  start: async () => {
    const sshd = await startSshdWithHome();
    return { executor: sshExecutorConfig(sshd), home: sshd.home, stop: () => sshd.stop() };
  },
});

describeConfinement('file tools in a container target (podman exec, the container overlay as HOME)', {
  available: podmanAvailable(),
  start: async () => {
    const container = await startContainer();
    return {
      executor: {
        kind: 'container',
        engine: 'podman',
        container: container.name,
        engineArgs: container.engineArgs,
      },
      home: '/root',
      stop: () => container.stop(),
    };
  },
});
