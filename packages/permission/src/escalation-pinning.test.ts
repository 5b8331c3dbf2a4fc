// Invariant: a command a host rule or an `always` answer lets run with the user's rights (out of the sandbox, or with the sandbox off) runs only what the rule was granted on: once a sandboxed command has rewritten what it executes — a package.json script or its pre/post script, a repository's config or hooks, a Makefile, a script — it is asked again (denied without an approver, naming the file) and nothing runs, while a change that does not touch what it runs (a new dependency) changes nothing.
import 'reflect-metadata';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ApprovalRequest, type ApproveFn, type ToolResult } from '@conch/core';
import { findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { loadShellParser } from '@conch/shell-syntax';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionConfigSchema, type PermissionConfigInput } from './config.js';
import { PermissionEngine } from './gate.js';
import { getPermissionEngine, permissionPlugin } from './plugin.js';

/** The README's rules, and one for a Makefile target and one for a script. */
const RULES = ['npm run test:*', 'git status', 'git commit:*', 'make build', './scripts/release.sh'];
const STEP = 120_000;

let dir: string;
let home: string;
/** Outside the workspace, in HOME: read-only in the sandbox, so a marker here proves a command ran outside. */
let out: string;
const registries: PluginRegistry[] = [];
const realHome = process.env.HOME;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-pinning-')));
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-pinning-home-')));
  out = join(home, 'outside');
  mkdirSync(out);
  process.env.HOME = home;
  write({
    'package.json': JSON.stringify(
      {
        name: 'app',
        version: '1.0.0',
        private: true,
        scripts: { 'test:unit': `touch ${out}/test-unit-ran`, lint: `touch ${out}/lint-ran` },
      },
      null,
      2,
    ),
    Makefile: `build:\n\ttouch ${out}/build-ran\n\ndist:\n\ttouch ${out}/dist-ran\n`,
    'scripts/release.sh': `#!/bin/sh\ntouch ${out}/release-ran\n`,
    'scripts/deploy.sh': `#!/bin/sh\ntouch ${out}/deploy-ran\n`,
  });
  chmodSync(join(dir, 'scripts/release.sh'), 0o755);
  chmodSync(join(dir, 'scripts/deploy.sh'), 0o755);
  // A repository the host made, with a hook that shows a commit ran outside.
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.name', 'Conch Test');
  git(dir, 'config', 'user.email', 'conch-test@example.invalid');
  writeFileSync(join(dir, '.git/hooks/pre-commit'), `#!/bin/sh\ntouch ${out}/pre-commit-ran\n`, {
    mode: 0o755,
  });
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'initial');
  rmSync(join(out, 'pre-commit-ran'));
  // A nested repository with husky 9: core.hooksPath `.husky/_`, whose hooks run `.husky/<hook>`.
  write({
    'h9/.husky/_/h':
      '#!/usr/bin/env sh\nn=$(basename "$0")\ns=$(dirname "$(dirname "$0")")/$n\n[ ! -f "$s" ] && exit 0\nsh -e "$s" "$@"\n',
    'h9/.husky/_/pre-commit': '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n',
    'h9/.husky/_/post-commit': '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n',
    'h9/.husky/pre-commit': 'true\n',
  });
  chmodSync(join(dir, 'h9/.husky/_/pre-commit'), 0o755);
  chmodSync(join(dir, 'h9/.husky/_/post-commit'), 0o755);
  git(join(dir, 'h9'), 'init', '-q');
  git(join(dir, 'h9'), 'config', 'core.hooksPath', '.husky/_');
});
afterEach(async () => {
  for (const registry of registries.splice(0)) {
    const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
    await registry.dispose();
    if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
  }
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
  process.env.HOME = realHome;
});

/** git as the host (and the human) runs it, with a committer for repositories born in the sandbox. */
const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Conch Test',
  GIT_AUTHOR_EMAIL: 'conch-test@example.invalid',
  GIT_COMMITTER_NAME: 'Conch Test',
  GIT_COMMITTER_EMAIL: 'conch-test@example.invalid',
};

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, HOME: home, ...GIT_ENV },
  });
}

function write(files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
}

/** The marker path as commands write it (`OUT` in the tables). */
const outside = (text: string) => text.replaceAll('OUT', out);

type Result = ToolResult & Record<string, any>;

/** A registry as a host builds it: the rules, the sandbox (default: where bubblewrap works), no approver. */
function setup(permission: PermissionConfigInput = {}) {
  const registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
  registries.push(registry);
  registry.exposeSync('permission', { rules: { allow: RULES }, ...permission });
  registry.exposeSync('cli', {});
  const started: string[] = [];
  registry.events.on('process.started', (e) => started.push(e.command));
  const run = async (args: Record<string, unknown>, approve?: ApproveFn) =>
    (await registry.execute(
      'cli_based_tool',
      { background: false, timeout: 300, ...args },
      approve ? { approve } : {},
    )) as Result;
  /** A command in the sandbox, as the agent runs one: no question, confined. */
  const inside = async (command: string) => {
    const result = await run({ command });
    expect(result, `${command}\n${JSON.stringify(result)}`).toMatchObject({
      returncode: 0,
      sandbox: 'workspace-write',
    });
    return result;
  };
  /** The model asks to run `command` outside the sandbox. */
  const escalate = (command: string, cwd?: string, approve?: ApproveFn) =>
    run(
      { command, sandbox: false, justification: 'needs the real toolchain', ...(cwd ? { cwd } : {}) },
      approve,
    );
  return { registry, run, inside, escalate, started };
}

/** An approver that records each question and says no. */
function refusing() {
  const asked: ApprovalRequest[] = [];
  const approve: ApproveFn = async (request) => {
    asked.push(request);
    return 'deny';
  };
  return { asked, approve };
}

/** Runs `command` with real bash, as the human's shell would: proves the change really runs code. */
function bash(command: string, cwd: string = dir): void {
  spawnSync('bash', ['-c', command], {
    cwd,
    env: { ...process.env, HOME: home, ...GIT_ENV },
    stdio: 'ignore',
  });
}

describe.runIf(findBwrap() || process.env.CI)('escalations allowed by a rule, with the sandbox on', () => {
  it.each([
    ['npm run test:unit', undefined, 'test-unit-ran', 'allow:npm run test:*'],
    ['make build', undefined, 'build-ran', 'allow:make build'],
    ['./scripts/release.sh', undefined, 'release-ran', 'allow:./scripts/release.sh'],
    ['git commit --allow-empty -m checkpoint', undefined, 'pre-commit-ran', 'allow:git commit:*'],
    ['npm run test:unit', 'scripts', 'test-unit-ran', 'allow:npm run test:*'],
  ])(
    'unchanged, %j (in %s) runs outside without asking anyone',
    async (command, cwd, marker, rule) => {
      const { escalate, registry } = setup();
      const { asked, approve } = refusing();
      const result = await escalate(command, cwd, approve);
      expect(result, JSON.stringify(result)).toMatchObject({ returncode: 0, sandbox: 'protected' });
      expect(existsSync(join(out, marker))).toBe(true);
      expect(asked).toEqual([]);
      expect(getPermissionEngine(registry)!.audit().at(-1)).toMatchObject({
        outcome: 'allow',
        rule,
        sandbox: 'outside',
      });
    },
    STEP,
  );

  it(
    'unchanged, git status runs outside without asking anyone',
    async () => {
      const { escalate, registry } = setup();
      const { asked, approve } = refusing();
      expect(await escalate('git status', undefined, approve)).toMatchObject({
        returncode: 0,
        sandbox: 'protected',
      });
      expect(asked).toEqual([]);
      expect(getPermissionEngine(registry)!.audit().at(-1)).toMatchObject({
        outcome: 'allow',
        rule: 'allow:git status',
        sandbox: 'outside',
      });
    },
    STEP,
  );

  /**
   * What a sandboxed command changes (or, `host`, a write the test makes on the host standing for one
   * the kernel missed: the host's repository config and hooks are read-only in the sandbox), the
   * escalation asked for afterwards, and what the reason must name. Every change makes the command
   * touch OUT/evil.
   */
  interface Variant {
    change: string | ((d: string) => void);
    command: string;
    cwd?: string;
    reason: RegExp;
    rule: string;
    /** Files the change needs (an agent writes them with its file tools). */
    files?: Record<string, string>;
  }

  const variants: Record<string, Variant> = {
    "sed rewrites scripts['test:unit']": {
      change: "sed -i 's/test-unit-ran/evil/' package.json",
      command: 'npm run test:unit',
      reason:
        /^package\.json's scripts\["test:unit"\] changed since the rule "npm run test:\*" was granted \(a sandboxed command may have rewritten what it runs\)/,
      rule: 'pinned:package.json',
    },
    "node adds scripts['pretest:unit']": {
      change: `node -e 'const fs=require("fs");const j=JSON.parse(fs.readFileSync("package.json"));j.scripts["pretest:unit"]="touch OUT/evil";fs.writeFileSync("package.json",JSON.stringify(j))'`,
      command: 'npm run test:unit',
      reason:
        /^package\.json's scripts\["pretest:unit"\] is new since the rule "npm run test:\*" was granted/,
      rule: 'pinned:package.json',
    },
    "python adds scripts['posttest:unit']": {
      change: `python3 -c 'import json;j=json.load(open("package.json"));j["scripts"]["posttest:unit"]="touch OUT/evil";json.dump(j,open("package.json","w"))'`,
      command: 'npm run test:unit',
      reason: /^package\.json's scripts\["posttest:unit"\] is new since/,
      rule: 'pinned:package.json',
    },
    'a new test:* script': {
      change: `node -e 'const fs=require("fs");const j=JSON.parse(fs.readFileSync("package.json"));j.scripts["test:e2e"]="touch OUT/evil";fs.writeFileSync("package.json",JSON.stringify(j))'`,
      command: 'npm run test:e2e',
      reason: /^package\.json's scripts\["test:e2e"\] is new since the rule "npm run test:\*" was granted/,
      rule: 'pinned:package.json',
    },
    'a package.json born in a subdirectory': {
      change: `mkdir -p sub && echo '{"scripts":{"test:unit":"touch OUT/evil"}}' > sub/package.json`,
      command: 'npm run test:unit',
      cwd: 'sub',
      reason: /^sub\/package\.json's scripts\["test:unit"\] is new since/,
      rule: 'pinned:sub/package.json',
    },
    'an .npmrc naming a script-shell': {
      change: `printf '#!/bin/sh\\ntouch OUT/evil\\n' > evil.sh && chmod +x evil.sh && echo "script-shell=$PWD/evil.sh" > .npmrc`,
      command: 'npm run test:unit',
      reason: /^\.npmrc is new since the rule "npm run test:\*" was granted/,
      rule: 'pinned:.npmrc',
    },
    'core.fsmonitor in a repository born in the sandbox': {
      files: { 'born.sh': 'git init -q born\ngit -C born config core.fsmonitor "touch OUT/evil; false"\n' },
      change: 'sh born.sh',
      command: 'git status',
      cwd: 'born',
      reason: /^born\/\.git\/config is new since the rule "git status" was granted/,
      rule: 'pinned:born/.git/config',
    },
    'a hooks directory set in a repository born in the sandbox': {
      files: {
        'born.sh':
          'git init -q born\nmkdir -p born/.githooks\nprintf "#!/bin/sh\\ntouch OUT/evil\\n" > born/.githooks/pre-commit\nchmod +x born/.githooks/pre-commit\ngit -C born config core.hooksPath .githooks\n',
      },
      change: 'sh born.sh',
      command: 'git commit --allow-empty -m x',
      cwd: 'born',
      reason: /^born\/\.git\/config is new since the rule "git commit:\*" was granted/,
      rule: 'pinned:born/.git/config',
    },
    'core.fsmonitor in the host repository (a write the kernel missed)': {
      change: (d) => git(d, 'config', 'core.fsmonitor', outside('touch OUT/evil; false')),
      command: 'git status',
      reason: /^\.git\/config changed since the rule "git status" was granted/,
      rule: 'pinned:.git/config',
    },
    'a new hook in the host repository (a write the kernel missed)': {
      change: (d) =>
        writeFileSync(join(d, '.git/hooks/post-commit'), outside('#!/bin/sh\ntouch OUT/evil\n'), {
          mode: 0o755,
        }),
      command: 'git commit --allow-empty -m x',
      reason: /^\.git\/hooks changed since the rule "git commit:\*" was granted/,
      rule: 'pinned:.git/hooks',
    },
    'the pre-commit hook rewritten in the host repository (a write the kernel missed)': {
      change: (d) => writeFileSync(join(d, '.git/hooks/pre-commit'), outside('#!/bin/sh\ntouch OUT/evil\n')),
      command: 'git commit --allow-empty -m x',
      reason: /^\.git\/hooks changed since/,
      rule: 'pinned:.git/hooks',
    },
    "husky 9's pre-commit rewritten in a host repository (a write the kernel missed)": {
      change: (d) => writeFileSync(join(d, 'h9/.husky/pre-commit'), outside('touch OUT/evil\n')),
      command: 'git commit --allow-empty -m x',
      cwd: 'h9',
      reason: /^h9\/\.husky changed since the rule "git commit:\*" was granted/,
      rule: 'pinned:h9/.husky',
    },
    "a new hook in husky 9's directory of a host repository (a write the kernel missed)": {
      change: (d) => writeFileSync(join(d, 'h9/.husky/post-commit'), outside('touch OUT/evil\n')),
      command: 'git commit --allow-empty -m x',
      cwd: 'h9',
      reason: /^h9\/\.husky changed since the rule "git commit:\*" was granted/,
      rule: 'pinned:h9/.husky',
    },
    'core.hooksPath pointed into the workspace': {
      files: { 'hooks/pre-commit': '#!/bin/sh\ntouch OUT/evil\n' },
      change: (d) => {
        chmodSync(join(d, 'hooks/pre-commit'), 0o755);
        git(d, 'config', 'core.hooksPath', 'hooks');
      },
      command: 'git commit --allow-empty -m x',
      reason: /^\.git\/config changed since the rule "git commit:\*" was granted/,
      rule: 'pinned:.git/config',
    },
    'sed rewrites the Makefile': {
      change: "sed -i 's/build-ran/evil/' Makefile",
      command: 'make build',
      reason: /^Makefile changed since the rule "make build" was granted/,
      rule: 'pinned:Makefile',
    },
    'a recipe line appended to the Makefile': {
      change: "printf 'build:\\n\\ttouch OUT/evil\\n' >> Makefile",
      command: 'make build',
      reason: /^Makefile changed since/,
      rule: 'pinned:Makefile',
    },
    'a GNUmakefile that takes precedence': {
      change: "printf 'build:\\n\\ttouch OUT/evil\\n' > GNUmakefile",
      command: 'make build',
      reason: /^GNUmakefile is new since the rule "make build" was granted/,
      rule: 'pinned:GNUmakefile',
    },
    'sed rewrites the script': {
      change: "sed -i 's/release-ran/evil/' scripts/release.sh",
      command: './scripts/release.sh',
      reason: /^scripts\/release\.sh changed since the rule "\.\/scripts\/release\.sh" was granted/,
      rule: 'pinned:scripts/release.sh',
    },
    'a line appended to the script': {
      change: 'echo "touch OUT/evil" >> scripts/release.sh',
      command: './scripts/release.sh',
      reason: /^scripts\/release\.sh changed since/,
      rule: 'pinned:scripts/release.sh',
    },
    'the script replaced by a symlink': {
      change:
        "printf '#!/bin/sh\\ntouch OUT/evil\\n' > evil.sh && chmod +x evil.sh && ln -sf ../evil.sh scripts/release.sh",
      command: './scripts/release.sh',
      reason: /^scripts\/release\.sh changed since/,
      rule: 'pinned:scripts/release.sh',
    },
  };

  it.each(Object.keys(variants))(
    'after %s, the escalation asks, is refused without an approver, and nothing runs',
    async (name) => {
      const v = variants[name]!;
      const { inside, escalate, started, run } = setup();
      if (v.files) write(Object.fromEntries(Object.entries(v.files).map(([k, t]) => [k, outside(t)])));
      let landed = true;
      if (typeof v.change !== 'string') v.change(dir);
      else if (!v.cwd?.startsWith('born')) await inside(outside(v.change));
      else {
        // A repository born in the sandbox: its config is writable while that sandbox lives (unless
        // the sandbox refuses exec-capable config when it is created); it is new either way.
        const changed = await run({ command: outside(v.change) });
        landed = changed.returncode === 0;
        expect(existsSync(join(dir, 'born/.git/config'))).toBe(true);
      }
      const cwd = v.cwd ? join(dir, v.cwd) : dir;
      const before = started.length;

      // Asked: the human sees why, and says no; nothing runs.
      const { asked, approve } = refusing();
      const refused = await escalate(v.command, cwd, approve);
      expect(refused, JSON.stringify(refused)).toMatchObject({ permission_denied: true, rule: v.rule });
      expect(asked).toHaveLength(1);
      expect(asked[0]!.reason).toMatch(v.reason);
      expect(asked[0]!.reason).toMatch(
        /; it asks to run outside the sandbox \("needs the real toolchain"\)$/,
      );
      expect(asked[0]!.escalation?.justification).toBe('needs the real toolchain');
      // No approver: denied, with the reason.
      const denied = await escalate(v.command, cwd);
      expect(denied).toMatchObject({ permission_denied: true, rule: v.rule });
      expect(denied.error).toMatch(new RegExp(v.reason.source.replace(/^\^/, '')));
      expect(started.length).toBe(before);
      expect(existsSync(join(out, 'evil'))).toBe(false);

      // The shell would have run the changed code.
      if (!landed) return console.log(`[${name}] the sandbox refused the change`);
      bash(v.command, cwd);
      expect(existsSync(join(out, 'evil')), `bash -c ${v.command} did not run the change`).toBe(true);
    },
    STEP,
  );

  it(
    "the kernel already refuses a sandboxed hook in the host's repository; the snapshot is the second wall",
    async () => {
      write({ 'add-hook.sh': outside('printf "#!/bin/sh\\ntouch OUT/evil\\n" > .git/hooks/post-commit\n') });
      const { run } = setup();
      const result = await run({ command: 'sh add-hook.sh' });
      expect(result.returncode).not.toBe(0);
      expect(existsSync(join(dir, '.git/hooks/post-commit'))).toBe(false);
    },
    STEP,
  );

  it.each([
    [
      'a new dependency and version',
      `node -e 'const fs=require("fs");const j=JSON.parse(fs.readFileSync("package.json"));j.dependencies={"left-pad":"1.3.0"};j.version="1.1.0";fs.writeFileSync("package.json",JSON.stringify(j,null,2))'`,
    ],
    [
      'a new unrelated script',
      `python3 -c 'import json;j=json.load(open("package.json"));j["scripts"]["build"]="tsc";json.dump(j,open("package.json","w"))'`,
    ],
    [
      'package.json reformatted',
      `node -e 'const fs=require("fs");fs.writeFileSync("package.json",JSON.stringify(JSON.parse(fs.readFileSync("package.json"))))'`,
    ],
    [
      'a new source file and a README',
      'mkdir -p src && echo "export {}" > src/a.ts && echo "# app" > README.md',
    ],
    [
      'a commit in the host repository',
      'echo x > notes.txt && git add notes.txt && git commit --no-verify -q -m notes',
    ],
  ])(
    'after %s, the escalation still runs outside without asking',
    async (_name, change) => {
      const { inside, escalate } = setup();
      await inside(change);
      const { asked, approve } = refusing();
      const result = await escalate('npm run test:unit', undefined, approve);
      expect(result, JSON.stringify(result)).toMatchObject({ returncode: 0, sandbox: 'protected' });
      expect(existsSync(join(out, 'test-unit-ran'))).toBe(true);
      expect(asked).toEqual([]);
    },
    STEP,
  );

  it.each([
    [
      'npm run lint',
      'lint-ran',
      "sed -i 's/lint-ran/evil/' package.json",
      /^package\.json's scripts\["lint"\] changed since the rule "npm run lint" was granted/,
    ],
    [
      'make dist',
      'dist-ran',
      "sed -i 's/dist-ran/evil/' Makefile",
      /^Makefile changed since the rule "make dist" was granted/,
    ],
    [
      './scripts/deploy.sh',
      'deploy-ran',
      'echo "touch OUT/evil" >> scripts/deploy.sh',
      /^scripts\/deploy\.sh changed since the rule "\.\/scripts\/deploy\.sh" was granted/,
    ],
    [
      'git commit --allow-empty -m y',
      'pre-commit-ran',
      // Hooks are read-only in the sandbox: the test adds one on the host (a write the kernel missed).
      (d: string) =>
        writeFileSync(join(d, '.git/hooks/post-commit'), outside('#!/bin/sh\ntouch OUT/evil\n'), {
          mode: 0o755,
        }),
      /^\.git\/hooks changed since the rule "git commit --allow-empty -m y" was granted/,
    ],
  ] as const)(
    '%j approved always runs again unasked, until what it runs changes; approved again, it holds anew',
    async (command, marker, change, reason) => {
      const { inside, escalate } = setup({ rules: { allow: [] } });
      const asked: ApprovalRequest[] = [];
      let answer: 'always' | 'deny' = 'always';
      const approve: ApproveFn = async (request) => (asked.push(request), answer);
      expect(await escalate(command, undefined, approve)).toMatchObject({
        returncode: 0,
        sandbox: 'protected',
      });
      expect(existsSync(join(out, marker))).toBe(true);
      expect(await escalate(command, undefined, approve)).toMatchObject({ returncode: 0 });
      expect(asked).toHaveLength(1);

      if (typeof change === 'string') await inside(outside(change));
      else change(dir);
      answer = 'deny';
      expect(await escalate(command, undefined, approve)).toMatchObject({ permission_denied: true });
      expect(asked).toHaveLength(2);
      expect(asked[1]!.reason).toMatch(reason);
      expect(asked[1]!.suggestedRule).toBe(command);
      expect(existsSync(join(out, 'evil'))).toBe(false);

      // Approving it again grants it on what is there now.
      answer = 'always';
      expect(await escalate(command, undefined, approve)).toMatchObject({ returncode: 0 });
      expect(existsSync(join(out, 'evil'))).toBe(true);
      expect(asked).toHaveLength(3);
      expect(await escalate(command, undefined, approve)).toMatchObject({ returncode: 0 });
      expect(asked).toHaveLength(3);
    },
    STEP,
  );
});

// A program the agent left in a directory on the host's PATH (a direnv `PATH_add bin`, an activated
// `.venv`, `node_modules/.bin`, a relative or empty entry) would run under the name of a command a
// rule or a human lets out of the sandbox: outside, PATH keeps no entry a sandboxed command could
// have written, and the command runs the system's program.
describe.runIf(findBwrap() || process.env.CI)('PATH outside the sandbox', () => {
  const realPath = process.env.PATH;
  afterEach(() => {
    process.env.PATH = realPath;
  });
  const plant = (name: string) => `#!/bin/sh\ntouch OUT/evil-${name}\nexit 0\n`;

  it.each([
    ['an absolute entry in the workspace', (d: string) => `${d}/bin:${realPath}`, 'bin'],
    ['a relative entry', () => `node_modules/.bin:${realPath}`, 'node_modules/.bin'],
    ['an empty entry (the current directory)', () => `:${realPath}`, '.'],
    ['a dot entry', () => `.:${realPath}`, '.'],
    ['an entry reaching the workspace through a symlink', () => `${home}/link/tools:${realPath}`, 'tools'],
  ])(
    '%s: a git and a make planted there do not run when the rule lets the real ones out',
    async (_name, pathOf, where) => {
      symlinkSync(dir, join(home, 'link'));
      process.env.PATH = pathOf(dir);
      const { inside, escalate } = setup();
      const at = (name: string) => (where === '.' ? name : `${where}/${name}`);
      await inside(
        outside(
          `mkdir -p ${where} && printf '${plant('git').replace(/\n/g, '\\n')}' > ${at('git')} && printf '${plant('make').replace(/\n/g, '\\n')}' > ${at('make')} && chmod +x ${at('git')} ${at('make')}`,
        ),
      );
      const commit = await escalate('git commit --allow-empty -m through-path');
      const build = await escalate('make build');
      // The same PATH inside the sandbox still finds them (there they run confined).
      const found = await inside('which git');
      process.env.PATH = realPath; // this test's own git below
      expect(commit, JSON.stringify(commit)).toMatchObject({ returncode: 0, sandbox: 'protected' });
      expect(git(dir, 'log', '-1', '--format=%s').trim()).toBe('through-path');
      expect(build).toMatchObject({ returncode: 0, sandbox: 'protected' });
      expect(existsSync(join(out, 'build-ran'))).toBe(true);
      expect(existsSync(join(out, 'evil-git'))).toBe(false);
      expect(existsSync(join(out, 'evil-make'))).toBe(false);
      expect(found.stdout).not.toMatch(/^\/usr\/bin\/git$|^\/bin\/git$/m);
    },
    STEP,
  );

  it(
    'a program found only there is not found outside, and the error says why and what to do',
    async () => {
      process.env.PATH = `${dir}/bin:${realPath}`;
      const { inside, escalate } = setup({ rules: { allow: ['deploy-tool'] } });
      await inside(
        outside(
          `mkdir -p bin && printf '#!/bin/sh\\ntouch OUT/deploy-ran\\n' > bin/deploy-tool && chmod +x bin/deploy-tool`,
        ),
      );
      const result = await escalate('deploy-tool');
      expect(result).toMatchObject({ returncode: 127, error_code: 'COMMAND_NOT_FOUND' });
      expect(result.error).toContain(
        `PATH leaves out what a sandboxed command could have written (${dir}/bin)`,
      );
      expect(existsSync(join(out, 'deploy-ran'))).toBe(false);
    },
    STEP,
  );
});

// What PATH is to programs, these variables are to the code programs load. A user's environment
// that names the workspace in one of them (a dev LD_LIBRARY_PATH of ./build/lib, PYTHONPATH=src, a
// team's GIT_CONFIG_GLOBAL, a BASH_ENV in scripts/) would load what the agent wrote into the real
// programs a rule or a human lets out: outside, those entries are left out.
describe.runIf(findBwrap() || process.env.CI)('load paths outside the sandbox', () => {
  const names = [
    'PYTHONPATH',
    'GIT_CONFIG_GLOBAL',
    'BASH_ENV',
    'LD_PRELOAD',
    'LD_LIBRARY_PATH',
    'NODE_OPTIONS',
    'PERL5OPT',
    'GIT_SSH_COMMAND',
  ];
  const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  afterEach(() => {
    for (const n of names) {
      if (saved[n] === undefined) delete process.env[n];
      else process.env[n] = saved[n];
    }
  });
  const cc = ['cc', 'gcc'].find((c) => spawnSync(c, ['--version']).status === 0);

  it.each([
    [
      'PYTHONPATH: a sitecustomize.py python imports at start',
      { PYTHONPATH: 'DIR/pylib' },
      `mkdir -p pylib && printf 'open("OUT/evil-py", "w").close()\\n' > pylib/sitecustomize.py`,
      'python3 tools/check.py',
      0,
    ],
    [
      'GIT_CONFIG_GLOBAL: a config whose core.fsmonitor git runs',
      { GIT_CONFIG_GLOBAL: 'DIR/conf/team.gitconfig' },
      `mkdir -p conf && printf '[core]\\n\\tfsmonitor = touch OUT/evil-git\\n' > conf/team.gitconfig`,
      'git status',
      0,
    ],
    [
      'BASH_ENV: a file every non-interactive bash sources first',
      { BASH_ENV: 'DIR/scripts/env.sh' },
      `printf 'touch OUT/evil-bash\\n' > scripts/env.sh`,
      'git status; git status',
      0,
    ],
    [
      'LD_PRELOAD by name on an LD_LIBRARY_PATH of the workspace: a library git loads',
      { LD_PRELOAD: 'libmark.so', LD_LIBRARY_PATH: 'DIR/lib:/usr/lib' },
      `mkdir -p lib && printf '#include <fcntl.h>\\n#include <unistd.h>\\n__attribute__((constructor)) static void m(void) { char e[256] = {0}; readlink("/proc/self/exe", e, 255); if (e[0] && !access("OUT", W_OK)) close(open("OUT/evil-ld", O_CREAT | O_WRONLY, 0644)); }\\n' > lib/m.c && cc -shared -fPIC -o lib/libmark.so lib/m.c`,
      'git status',
      0,
    ],
    [
      "NODE_OPTIONS' --require: a script node runs before any program (the user's heap flag stays)",
      { NODE_OPTIONS: '--max-old-space-size=512 --require DIR/hooks/trace.js' },
      `mkdir -p hooks && printf 'require("fs").writeFileSync("OUT/evil-node", "")\\n' > hooks/trace.js`,
      'node -p 1',
      0,
    ],
    [
      "PERL5OPT's -I and -M: a module perl loads from the workspace (without it, perl says the module is missing)",
      { PERL5OPT: '-IDIR/plib -MMark' },
      `mkdir -p plib && printf 'open(my $f, ">", "OUT/evil-perl"); 1;\\n' > plib/Mark.pm`,
      'perl -e 1',
      2,
    ],
    [
      "GIT_SSH_COMMAND's -F: an ssh config of the workspace whose ProxyCommand ssh runs",
      { GIT_SSH_COMMAND: 'ssh -F DIR/conf/ssh_config' },
      `mkdir -p conf && printf 'Host *\\n  ProxyCommand touch OUT/evil-ssh\\n' > conf/ssh_config`,
      'git ls-remote ssh://git.example.invalid/r',
      128,
    ],
  ] as const)(
    '%s is left out of what a rule lets out',
    async (name, vars, plant, command, returncode) => {
      if (name.startsWith('LD_') && !cc) return;
      write({ 'tools/check.py': `open(${JSON.stringify(join(out, 'check-ran'))}, "w").close()\n` });
      const { inside, escalate } = setup({ rules: { allow: [...RULES, 'python3 tools/check.py'] } });
      // The agent's plant, made in the sandbox before the variable names it (the inside commands
      // below run with it set too: there the plant runs confined, and OUT is read-only).
      await inside(outside(plant));
      for (const [key, value] of Object.entries(vars)) process.env[key] = value.replaceAll('DIR', dir);
      const control = spawnSync('bash', ['-c', command], {
        cwd: dir,
        env: { ...process.env, HOME: home },
        stdio: 'ignore',
      });
      const planted = readdirSync(out).filter((f) => f.startsWith('evil-'));
      expect(control.error, 'the control ran').toBeUndefined();
      expect(planted, 'the plant runs where the variable applies (the control)').toHaveLength(1);
      rmSync(join(out, planted[0]!));
      // A rule lets it out, or (a line of two) a human who answers yes.
      const result = await escalate(command, undefined, async () => 'always');
      expect(result, JSON.stringify(result)).toMatchObject({ returncode, sandbox: 'protected' });
      if (name.startsWith('NODE_OPTIONS')) expect(result.stdout).toBe('1\n');
      expect(readdirSync(out).filter((f) => f.startsWith('evil-'))).toEqual([]);
      if (command.startsWith('python3')) expect(existsSync(join(out, 'check-ran'))).toBe(true);
    },
    STEP,
  );
});

describe("with the sandbox 'off', commands a rule allows", () => {
  it.each([
    [
      'npm run test:unit',
      'test-unit-ran',
      (d: string) =>
        writeFileSync(
          join(d, 'package.json'),
          JSON.stringify({ scripts: { 'test:unit': outside('touch OUT/evil') } }),
        ),
      /^package\.json's scripts\["test:unit"\] changed since the rule "npm run test:\*" was granted/,
    ],
    [
      'make build',
      'build-ran',
      (d: string) => writeFileSync(join(d, 'Makefile'), outside('build:\n\ttouch OUT/evil\n')),
      /^Makefile changed since the rule "make build" was granted/,
    ],
    [
      'git commit --allow-empty -m x',
      'pre-commit-ran',
      (d: string) =>
        writeFileSync(join(d, '.git/hooks/pre-commit'), outside('#!/bin/sh\ntouch OUT/evil\n'), {
          mode: 0o755,
        }),
      /^\.git\/hooks changed since the rule "git commit:\*" was granted/,
    ],
  ])(
    '%j runs unasked while unchanged, and asks once what it runs changed',
    async (command, marker, change, reason) => {
      const { run } = setup({ sandbox: 'off' });
      const { asked, approve } = refusing();
      expect(await run({ command }, approve), command).toMatchObject({ returncode: 0 });
      expect(existsSync(join(out, marker))).toBe(true);
      expect(asked).toEqual([]);

      change(dir);
      const refused = await run({ command }, approve);
      expect(refused).toMatchObject({ permission_denied: true });
      expect(asked).toHaveLength(1);
      expect(asked[0]!.reason).toMatch(reason);
      expect(asked[0]!.suggestedRule).toBe(command);
      const denied = await run({ command });
      expect(denied.error).toMatch(new RegExp(reason.source.replace(/^\^/, '')));
      expect(existsSync(join(out, 'evil'))).toBe(false);
      bash(command);
      expect(existsSync(join(out, 'evil'))).toBe(true);
    },
    STEP,
  );

  it(
    'an always answer after a change grants the command on what is there now; a later change asks again',
    async () => {
      const { run } = setup({ sandbox: 'off' });
      writeFileSync(
        join(dir, 'package.json'),
        JSON.stringify({ scripts: { 'test:unit': outside('touch OUT/second') } }),
      );
      const asked: ApprovalRequest[] = [];
      let answer: 'always' | 'deny' = 'always';
      const approve: ApproveFn = async (request) => (asked.push(request), answer);
      expect(await run({ command: 'npm run test:unit' }, approve)).toMatchObject({ returncode: 0 });
      expect(existsSync(join(out, 'second'))).toBe(true);
      expect(await run({ command: 'npm run test:unit' }, approve)).toMatchObject({ returncode: 0 });
      expect(asked).toHaveLength(1);
      writeFileSync(
        join(dir, 'package.json'),
        JSON.stringify({ scripts: { 'test:unit': outside('touch OUT/evil') } }),
      );
      answer = 'deny';
      expect(await run({ command: 'npm run test:unit' }, approve)).toMatchObject({ permission_denied: true });
      expect(asked).toHaveLength(2);
      expect(asked[1]!.reason).toMatch(
        /scripts\["test:unit"\] changed since the rule "npm run test:unit" was granted/,
      );
      expect(existsSync(join(out, 'evil'))).toBe(false);
    },
    STEP,
  );
});

describe('the snapshot is bounded, and fails closed beyond its bounds', () => {
  const cmd = (command: string, cwd: string) => ({
    kind: 'command' as const,
    tool: 'cli_based_tool',
    command,
    cwd,
  });

  it.each([
    [
      'a package.json deeper than the walk goes',
      { index: { entries: 100_000, depth: 1 } },
      'a/b/c',
      /^a\/b\/c\/package\.json's scripts\["test:unit"\] is not in the snapshot taken when the rule "npm run test:\*" was granted \(the workspace is deeper than 1 directories\)/,
    ],
    [
      'a workspace with more entries than the walk reads',
      { index: { entries: 40, depth: 48 } },
      'a/b/c',
      /is not in the snapshot taken when the rule "npm run test:\*" was granted \(the workspace has more than 40 entries\)/,
    ],
    [
      'more files than the grant reads',
      { read: { files: 1, bytes: 1 << 20 } },
      'a/b/c',
      /is not in the snapshot taken when the rule "npm run test:\*" was granted \(there are more files or bytes to read than conch reads\)/,
    ],
  ])('%s: the escalation asks', async (_name, limits, cwd, reason) => {
    write({ 'a/b/c/package.json': JSON.stringify({ scripts: { 'test:unit': 'true' } }) });
    for (let i = 0; i < 50; i++) write({ [`many/f${i}`]: '' });
    const e = new PermissionEngine({
      parser: await loadShellParser(),
      config: permissionConfigSchema.parse({ sandbox: 'off', rules: { allow: RULES } }),
      cwd: dir,
      home,
      grantLimits: limits,
    });
    const d = await e.check(cmd('npm run test:unit', join(dir, cwd)), { callId: '1' });
    expect(d).toMatchObject({ outcome: 'deny', rule: 'pinned:a/b/c/package.json' });
    expect(d.reason).toMatch(new RegExp(reason.source.replace(/^\^/, '')));
    // Within the bounds the same command is allowed.
    const within = new PermissionEngine({
      parser: await loadShellParser(),
      config: permissionConfigSchema.parse({ sandbox: 'off', rules: { allow: RULES } }),
      cwd: dir,
      home,
    });
    expect(await within.check(cmd('npm run test:unit', join(dir, cwd)), { callId: '2' })).toMatchObject({
      outcome: 'allow',
      rule: 'allow:npm run test:*',
    });
  });

  it('a file that cannot be read asks, naming it', async () => {
    writeFileSync(join(dir, 'package.json'), '{ "scripts": ');
    const e = new PermissionEngine({
      parser: await loadShellParser(),
      config: permissionConfigSchema.parse({ sandbox: 'off', rules: { allow: RULES } }),
      cwd: dir,
      home,
    });
    const d = await e.check(cmd('npm run test:unit', dir), { callId: '1' });
    expect(d).toMatchObject({ outcome: 'deny', rule: 'pinned:package.json' });
    expect(d.reason).toMatch(
      /package\.json's scripts\["test:unit"\] cannot be read \(it is not valid JSON\), so it cannot be shown unchanged since the rule "npm run test:\*" was granted/,
    );
    expect(e.audit().at(-1)).toMatchObject({ rule: 'pinned:package.json', verdict: 'ask' });
  });
});
