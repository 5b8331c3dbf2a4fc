import type { ParsedCommand, Redirect, ShellParser, SimpleCommand } from '@conch/shell-syntax';
import { dirname } from 'node:path';
import {
  baseName,
  DANGEROUS_ENV,
  DOWNLOADERS,
  isInterpreter,
  PRIVILEGE,
  readsProgramFromStdin,
  SAFE_COMMANDS,
  shellInvocation,
  SHELLS,
  SYSTEM_DIRS,
  unwrap,
  type Word,
} from './commands.js';
import type { SafetyRuleId } from './config.js';
import { hasHidden } from './display.js';
import { absolute, checkWriteTarget, expandKnown, isRootLike, type PathContext } from './paths.js';
import type { CompiledRule } from './rules.js';

export type Verdict = 'allow' | 'ask' | 'deny';
const RANK: Record<Verdict, number> = { allow: 0, ask: 1, deny: 2 };

/** The decision on one simple command (or on a whole-command construct). */
export interface Part {
  command: string;
  verdict: Verdict;
  reason: string;
  /** `safety:<id>`, `deny:<rule>`, `ask:<rule>`, `allow:<rule>`, `readOnly:<cmd>`, `failClosed:<what>`, `unknown`. */
  rule: string;
  /** The rule that would allow this part (for asks host rules can answer). */
  suggestedRule?: string;
}

export interface Analysis {
  verdict: Verdict;
  /** The strictest part. */
  decisive: Part;
  parts: Part[];
}

export interface AnalyzerOptions {
  parser: ShellParser;
  safety: Record<SafetyRuleId, boolean>;
  rules: { allow: CompiledRule[]; ask: CompiledRule[]; deny: CompiledRule[] };
  /** `always` answers of this session, in the host-rule syntax. */
  sessionAllow: () => readonly CompiledRule[];
  /** Whether host allow rules count (false in readOnly mode). */
  useAllowRules: boolean;
  home: string;
  workspaceRoot: string;
  protectedGlobs: PathContext['extra'];
  maxBytes: number;
  timeoutMs: number;
  maxNesting: number;
}

interface Scope {
  cwd: string | undefined;
  depth: number;
}

const OUTPUT_OPERATORS = new Set(['>', '>>', '&>', '&>>', '>|', '<>']);
const HARMLESS_TARGETS = /^\/dev\/(null|stdout|stderr|tty|fd\/[0-2])$/;
const PRIVILEGE_WORD = /(^|[\s;&|(){}`$'"=])(sudo|sudoedit|su|doas|pkexec|run0|runuser)(?=$|[\s;&|(){}`'"])/;
// The lookbehind makes each name start only at the beginning of a run, so the match stays linear.
const FORK_BOMB = /(?<![\w:.-])([A-Za-z_:.][\w:.-]*)\s*\(\s*\)\s*\{[^}]*?\1\s*\|\s*\1\s*&/;

/** Decides on a command line by reading it as the shell will. */
export class Analyzer {
  constructor(private readonly o: AnalyzerOptions) {}

  analyze(line: string, cwd: string): Analysis {
    const parts = this.analyzeLine(line, { cwd, depth: 0 });
    return summarize(parts);
  }

  /** Whether `rule` (a compiled host rule) matches `line` the way the gate would use it. */
  ruleMatches(rule: CompiledRule, line: string): boolean {
    const parsed = this.o.parser.parse(line, { maxBytes: this.o.maxBytes, timeoutMs: this.o.timeoutMs });
    if (!parsed.ok) return false;
    const texts: string[][] = parsed.commands
      .filter((c) => c.words.length > 0)
      .map((c) => this.levels(c).map((l) => l.map((w) => w.value).join(' ')));
    if (texts.length === 0) return false;
    if (rule.list === 'allow') return texts.every((levels) => levels.some((t) => rule.test(t)));
    return texts.some((levels) => levels.some((t) => rule.test(t)));
  }

  private analyzeLine(line: string, scope: Scope): Part[] {
    const parts: Part[] = [];
    const shown = short(line);
    if (this.o.safety.forkBomb && line.length <= this.o.maxBytes && FORK_BOMB.test(line)) {
      parts.push({
        command: shown,
        verdict: 'deny',
        reason: 'this is a fork bomb: a function that pipes into itself in the background',
        rule: 'safety:forkBomb',
      });
      return parts;
    }
    const parsed = this.o.parser.parse(line, { maxBytes: this.o.maxBytes, timeoutMs: this.o.timeoutMs });
    if (!parsed.ok) {
      if (this.o.safety.privilegeEscalation && PRIVILEGE_WORD.test(line.slice(0, 1 << 20))) {
        parts.push({
          command: shown,
          verdict: 'deny',
          reason:
            'the command mentions a privilege-escalation program (sudo, su, doas, pkexec) and cannot be parsed to prove it is not run',
          rule: 'safety:privilegeEscalation',
        });
      }
      parts.push({
        command: shown,
        verdict: 'ask',
        reason: `the command cannot be checked: ${parsed.error ?? 'parse error'}`,
        rule: 'failClosed:parse',
      });
      return parts;
    }
    parts.push(...this.constructs(parsed, shown));
    if (this.o.safety.forkBomb && parsed.normalizedSource && FORK_BOMB.test(parsed.normalizedSource)) {
      parts.push({ command: shown, verdict: 'deny', reason: 'this is a fork bomb', rule: 'safety:forkBomb' });
    }
    const finals: { command: SimpleCommand; base: string; args: Word[] }[] = [];
    let cwd = scope.cwd;
    for (const command of parsed.commands) {
      const result = this.simple(command, { cwd, depth: scope.depth });
      parts.push(...result.parts);
      if (result.final) finals.push({ command, ...result.final });
      if (result.cwdAfter !== 'same') cwd = result.cwdAfter;
    }
    parts.push(...this.downloads(parsed, finals, shown));
    return parts;
  }

  /** Whole-command constructs the gate cannot prove harmless. */
  private constructs(parsed: ParsedCommand, shown: string): Part[] {
    const f = parsed.flags;
    const out: Part[] = [];
    const ask = (what: string, reason: string) =>
      out.push({ command: shown, verdict: 'ask', reason, rule: `failClosed:${what}` });
    if (f.commandSubstitution)
      ask(
        'commandSubstitution',
        'it runs a command substitution $(...) whose output becomes part of the command',
      );
    if (f.processSubstitution) ask('processSubstitution', 'it uses process substitution <(...) / >(...)');
    if (f.parameterTransform)
      ask('parameterTransform', 'it uses an evaluating or indirect expansion (${x@P}, ${!x})');
    if (f.arithmetic) ask('arithmetic', 'arithmetic evaluation can run commands through array subscripts');
    if (f.functionDefinition)
      ask('functionDefinition', 'it defines a shell function, which can shadow any command');
    if (f.lineContinuation && parsed.normalizedSource !== undefined && continuationInsideWord(parsed.source))
      ask('lineContinuation', 'a backslash-newline splits a word, which hides what really runs');
    if (hasHidden(parsed.source))
      ask('hiddenCharacters', 'the command contains invisible or lookalike characters');
    return out;
  }

  /** A download that flows into an interpreter, through a pipe or a substitution. */
  private downloads(
    parsed: ParsedCommand,
    finals: { command: SimpleCommand; base: string; args: Word[] }[],
    shown: string,
  ): Part[] {
    const downloaders = finals.filter((f) => DOWNLOADERS.has(f.base));
    if (downloaders.length === 0) return [];
    const out: Part[] = [];
    for (const f of finals) {
      const sourcing = f.base === 'eval' || f.base === 'source' || f.base === '.';
      if (!isInterpreter(f.base) && !sourcing) continue;
      const substituted = f.args.some((a) => !a.literal && /\$\(|`|<\(/.test(a.raw));
      const fromStdin = sourcing
        ? f.args.some(
            (a) =>
              a.value === '/dev/stdin' ||
              a.value === '-' ||
              a.value.startsWith('/dev/fd/') ||
              a.value.startsWith('/proc/self/fd/'),
          )
        : readsProgramFromStdin(f.base, f.args);
      const piped =
        f.command.pipeline !== undefined &&
        downloaders.some(
          (d) =>
            d.command.pipeline?.id === f.command.pipeline!.id &&
            d.command.pipeline!.stage < f.command.pipeline!.stage,
        );
      if (!(substituted || (piped && fromStdin))) continue;
      const rule: SafetyRuleId = sourcing ? 'sourceDownloaded' : 'downloadToInterpreter';
      if (!this.o.safety[rule]) continue;
      out.push({
        command: shown,
        verdict: 'deny',
        reason: `it runs downloaded code with ${f.base} without review. Download it to a file first (curl -fsSLo script.sh URL), read it, then run it (sh script.sh)`,
        rule: `safety:${rule}`,
      });
    }
    if (parsed.flags.pipeline && out.length === 0) return [];
    return out;
  }

  /** Every wrapper level of a command's argv: [full, unwrapped once, ...]. */
  private levels(command: SimpleCommand): Word[][] {
    const out: Word[][] = [];
    let words = toWords(command);
    for (let i = 0; i < 8 && words.length; i++) {
      out.push(words);
      const w0 = words[0]!;
      if (!w0.literal) break;
      const u = unwrap(baseName(w0.value), words.slice(1));
      if (!u || u.kind !== 'inner') break;
      words = u.words;
    }
    return out;
  }

  private simple(
    command: SimpleCommand,
    scope: Scope,
  ): { parts: Part[]; final?: { base: string; args: Word[] }; cwdAfter: string | undefined | 'same' } {
    const parts: Part[] = [];
    const shown = short(command.text);
    const ctx: PathContext = {
      cwd: scope.cwd,
      home: this.o.home,
      workspaceRoot: this.o.workspaceRoot,
      extra: this.o.protectedGlobs,
    };
    const add = (verdict: Verdict, reason: string, rule: string, suggestedRule?: string) =>
      parts.push({ command: shown, verdict, reason, rule, ...(suggestedRule ? { suggestedRule } : {}) });

    // Writes through redirections.
    let writes = false;
    let writesOutsideWorkspace = false;
    for (const r of command.redirects) {
      const target = writeTarget(r);
      if (target === undefined) continue;
      writes = true;
      const check = checkWriteTarget(target, r.targetLiteral, ctx);
      if (check.kind === 'protected') {
        if (this.o.safety.protectedPaths)
          add('deny', `it writes to ${check.reason}`, 'safety:protectedPaths');
        else writesOutsideWorkspace = true;
      } else if (check.kind === 'unknown') {
        writesOutsideWorkspace = true;
      } else if (!inside(check.abs, this.o.workspaceRoot) && !inside(check.abs, '/tmp')) {
        writesOutsideWorkspace = true;
      }
    }

    // Assignments before the command (`FOO=1 cmd`) and bare ones (`PATH=...`).
    let envRisk: string | undefined;
    for (const a of command.assignments) {
      const name = a.name.replace(/\+$/, '');
      if (DANGEROUS_ENV.test(name))
        envRisk = `it sets ${name}, which changes what later commands run or load`;
    }
    if (command.words.length === 0) {
      if (envRisk) add('ask', envRisk, 'failClosed:environment');
      else add('allow', 'it only sets shell variables', 'readOnly:assignment');
      return { parts, cwdAfter: 'same' };
    }

    let words = toWords(command);
    let cwdAfter: string | undefined | 'same' = 'same';
    let dynamicArgs = false;
    const levels: Word[][] = [];
    let final: { base: string; args: Word[] } | undefined;
    let wrapperSafe = false;
    for (let level = 0; level < 8; level++) {
      levels.push(words);
      const name = words[0]!;
      const args = words.slice(1);
      if (!name.literal) {
        add(
          'ask',
          `the command name ${name.raw} is not literal, so what runs is decided at run time`,
          'failClosed:dynamicName',
        );
        break;
      }
      if (/^\$['"]/.test(name.raw)) {
        add(
          'ask',
          `the command name is written with ANSI-C or locale quoting (${name.raw} is ${JSON.stringify(name.value)})`,
          'failClosed:quotedName',
        );
      }
      const base = baseName(name.value);
      final = { base, args };
      if (PRIVILEGE.has(base)) {
        if (this.o.safety.privilegeEscalation)
          add(
            'deny',
            `${base} runs commands with elevated privileges, which agents may not do`,
            'safety:privilegeEscalation',
          );
        else add('ask', `${base} runs commands with elevated privileges`, 'unknown', suggestRule(words));
        break;
      }
      const u = unwrap(base, args);
      if (u) {
        if (u.kind === 'inner') {
          if (u.env)
            for (const e of u.env)
              if (DANGEROUS_ENV.test(e.value.split('=')[0]!))
                envRisk = `it sets ${e.value.split('=')[0]} through env`;
          if (u.cwdChange) ctx.cwd = undefined;
          if (u.dynamicArgs) dynamicArgs = true;
          words = u.words;
          continue;
        }
        if (u.kind === 'string') {
          if (envRisk) add('ask', envRisk, 'failClosed:environment');
          parts.push(...this.nestedLine(u.script, base, shown, { cwd: ctx.cwd, depth: scope.depth }));
          final = undefined;
          break;
        }
        if (u.kind === 'opaque') {
          add('ask', `cannot see what ${base} runs: ${u.reason}`, 'failClosed:wrapper', suggestRule(words));
          break;
        }
        wrapperSafe = u.safe === true;
      }
      const plainCheck = () =>
        this.plain(words, base, args, {
          add,
          ctx,
          dynamicArgs,
          writes,
          writesOutsideWorkspace,
          envRisk,
          wrapperSafe,
          levels,
          scope,
        });
      if (SHELLS.has(base) || base === 'busybox') {
        const shArgs = base === 'busybox' ? args.slice(1) : args;
        if (base === 'busybox' && !(args[0] && SHELLS.has(args[0].value))) {
          plainCheck();
          break;
        }
        if (envRisk) add('ask', envRisk, 'failClosed:environment');
        const how = shellInvocation(shArgs);
        if (how.kind === 'string')
          parts.push(...this.nestedLine(how.script, base, shown, { cwd: ctx.cwd, depth: scope.depth }));
        else if (how.kind === 'file')
          add(
            'ask',
            `${base} runs the script ${how.file.raw}, which the gate cannot read`,
            'unknown',
            suggestRule(words),
          );
        else if (how.kind === 'stdin')
          add('ask', `${base} runs commands read from its input`, 'unknown', suggestRule(words));
        else add('ask', `cannot see what ${base} runs: ${how.reason}`, 'failClosed:wrapper');
        this.hostRules(levels, add, false);
        break;
      }
      if (base === 'eval') {
        if (args.every((a) => a.literal) && args.length) {
          const text = args.map((a) => a.value).join(' ');
          parts.push(
            ...this.nestedLine({ value: text, literal: true, raw: text }, 'eval', shown, {
              cwd: ctx.cwd,
              depth: scope.depth,
            }),
          );
        }
        add('ask', 'eval builds a command at run time', 'failClosed:eval');
        if (envRisk) add('ask', envRisk, 'failClosed:environment');
        this.hostRules(levels, add, false);
        break;
      }
      if (base === 'cd' || base === 'pushd') {
        const target = args.find((a) => !a.value.startsWith('-') || !a.literal);
        if (!target) cwdAfter = base === 'cd' && args.length === 0 ? this.o.home : undefined;
        else {
          const expanded = expandKnown(target.value, target.literal, ctx);
          cwdAfter = expanded === undefined ? undefined : absolute(expanded, ctx);
        }
      }
      if (base === 'find') this.findExec(args, shown, ctx, scope, parts);
      plainCheck();
      break;
    }
    return { parts, ...(final ? { final } : {}), cwdAfter };
  }

  /** The decision for a command once wrappers are looked through. */
  private plain(
    words: Word[],
    base: string,
    args: Word[],
    s: {
      add: (verdict: Verdict, reason: string, rule: string, suggestedRule?: string) => void;
      ctx: PathContext;
      dynamicArgs: boolean;
      writes: boolean;
      writesOutsideWorkspace: boolean;
      envRisk: string | undefined;
      wrapperSafe: boolean;
      levels: Word[][];
      scope: Scope;
    },
  ): void {
    const { add, ctx } = s;
    const name = words[0]!.value;
    const denied = this.safetyOnArgs(base, args, ctx, add, s.dynamicArgs);
    const host = this.hostRules(s.levels, add, true, s.writesOutsideWorkspace || s.envRisk !== undefined);
    if (denied || host) return;
    if (s.envRisk) {
      add('ask', s.envRisk, 'failClosed:environment', suggestRule(words));
      return;
    }
    const byPath = name.includes('/');
    if (byPath && !SYSTEM_DIRS.has(dirname(name))) {
      add(
        'ask',
        `${name} runs a program by path, which may not be the system's ${base}`,
        'unknown',
        suggestRule(words),
      );
      return;
    }
    const check = SAFE_COMMANDS[base];
    if (s.wrapperSafe || check) {
      let why = s.wrapperSafe ? undefined : check!(args);
      if (why === undefined && s.dynamicArgs && check) {
        // xargs / find -exec append file names at run time: safe only if any argument is.
        why = check([...args, { value: '{}', literal: false, raw: '(arguments supplied at run time)' }]);
      }
      if (why === undefined) {
        if (s.writes)
          add(
            'ask',
            `${base} is read-only but the command writes a file through a redirection`,
            'unknown',
            suggestRule(words),
          );
        else add('allow', `${base} only reads`, `readOnly:${base}`);
        return;
      }
      add('ask', why, 'unknown', suggestRule(words));
      return;
    }
    // Unknown commands that are handed a privilege program as an argument may run it.
    if (this.o.safety.privilegeEscalation) {
      const priv = args.find((a) => a.literal && PRIVILEGE.has(baseName(a.value)));
      if (priv) {
        add(
          'deny',
          `${base} is given ${priv.value} as an argument and may run it with elevated privileges`,
          'safety:privilegeEscalation',
        );
        return;
      }
    }
    add('ask', `${base} is not a known read-only command`, 'unknown', suggestRule(words));
  }

  /** Host deny/ask rules on every wrapper level, allow rules on the full and innermost command. */
  private hostRules(
    levels: Word[][],
    add: (verdict: Verdict, reason: string, rule: string, suggestedRule?: string) => void,
    allowToo: boolean,
    allowBlocked = false,
  ): boolean {
    const texts = levels.map((l) => l.map((w) => w.value).join(' '));
    for (const rule of this.o.rules.deny) {
      if (texts.some((t) => rule.test(t))) {
        add('deny', `the host rule "${rule.text}" denies it`, `deny:${rule.text}`);
        return true;
      }
    }
    for (const rule of this.o.rules.ask) {
      if (texts.some((t) => rule.test(t))) {
        add('ask', `the host rule "${rule.text}" asks for it`, `ask:${rule.text}`);
        return true;
      }
    }
    if (!allowToo || allowBlocked) return false;
    const candidates = [texts[0]!, texts[texts.length - 1]!];
    const allowRules = [...(this.o.useAllowRules ? this.o.rules.allow : []), ...this.o.sessionAllow()];
    for (const rule of allowRules) {
      if (candidates.some((t) => rule.test(t))) {
        add('allow', `the rule "${rule.text}" allows it`, `allow:${rule.text}`);
        return true;
      }
    }
    return false;
  }

  /** Safety rules that look at a command's arguments: rm -r of roots, writes to protected paths. */
  private safetyOnArgs(
    base: string,
    args: Word[],
    ctx: PathContext,
    add: (verdict: Verdict, reason: string, rule: string) => void,
    dynamicArgs: boolean,
  ): boolean {
    let denied = false;
    const positionals = positionalArgs(args);
    if (base === 'rm' && this.o.safety.recursiveDeleteRoot) {
      const recursive = args.some(
        (a) => a.literal && (/^-[A-Za-z]*[rR][A-Za-z]*$/.test(a.value) || a.value === '--recursive'),
      );
      if (recursive) {
        for (const t of positionals) {
          const root = this.rootTarget(t, ctx);
          if (root) {
            add('deny', `rm -r would delete ${root}`, 'safety:recursiveDeleteRoot');
            denied = true;
            break;
          }
        }
      }
    }
    if (this.o.safety.protectedPaths) {
      let targets: Word[] = [];
      if (
        [
          'rm',
          'rmdir',
          'unlink',
          'shred',
          'truncate',
          'touch',
          'chmod',
          'chown',
          'chgrp',
          'tee',
          'mv',
        ].includes(base)
      )
        targets = positionals;
      else if (['cp', 'install', 'ln', 'rsync', 'scp'].includes(base)) {
        const t = args.findIndex((a) => a.value === '-t' || a.value === '--target-directory');
        targets = t >= 0 && args[t + 1] ? [args[t + 1]!] : positionals.slice(-1);
      } else if (base === 'dd')
        targets = args
          .filter((a) => a.value.startsWith('of='))
          .map((a) => ({ ...a, value: a.value.slice(3) }));
      else if (
        (base === 'sed' || base === 'perl') &&
        args.some((a) => /^-[A-Za-z]*i/.test(a.value) || a.value.startsWith('--in-place'))
      )
        targets = positionals.slice(1);
      else if (base === 'git') {
        const danger = gitConfigDanger(args);
        if (danger) {
          add(
            'deny',
            `it writes ${danger} to the git config, which makes git run a program`,
            'safety:protectedPaths',
          );
          return true;
        }
      }
      if (base === 'chmod' || base === 'chown' || base === 'chgrp') targets = targets.slice(1);
      for (const t of targets) {
        const check = checkWriteTarget(t.value === t.raw || t.literal ? t.value : t.raw, t.literal, ctx);
        if (check.kind === 'protected') {
          add('deny', `${base} would modify ${check.reason}`, 'safety:protectedPaths');
          denied = true;
          break;
        }
      }
      if (dynamicArgs && ['rm', 'mv', 'cp', 'tee', 'chmod', 'truncate', 'shred'].includes(base)) {
        // xargs / find -exec supply the file names at run time: nothing to prove here, it asks.
      }
    }
    return denied;
  }

  private rootTarget(t: Word, ctx: PathContext): string | undefined {
    const expanded = expandKnown(t.literal ? t.value : t.raw, t.literal, ctx);
    if (expanded === undefined) return undefined;
    let path = expanded;
    if (!t.literal && /[*?[]/.test(expanded)) {
      // `rm -rf *`, `./*`, `/*`, `~/.*`: the directory whose contents go.
      const m = /^(.*?)\/?\.?\*$/.exec(expanded);
      if (!m) return undefined;
      path = m[1] === '' ? (expanded.startsWith('/') ? '/' : '.') : m[1]!;
    }
    const abs = absolute(path, ctx);
    if (abs === undefined)
      return path === '.' || path === '..' || !path.startsWith('/')
        ? 'a directory under an unknown working directory'
        : undefined;
    const root = isRootLike(abs, ctx);
    return root ? (t.literal ? root : `everything in ${root}`) : undefined;
  }

  /** find -exec / -execdir / -ok: the inner command is decided like any other. */
  private findExec(args: Word[], shown: string, ctx: PathContext, scope: Scope, parts: Part[]): void {
    const leading = args.filter((a, i) => i < args.length && /^-[HLP]$|^-O\d$|^-D/.test(a.value) === false);
    const firstExpr = leading.findIndex((a) => /^[-(!]/.test(a.value));
    const starts = firstExpr < 0 ? leading : leading.slice(0, firstExpr);
    for (let i = 0; i < args.length; i++) {
      const v = args[i]!.value;
      if (v === '-delete' && this.o.safety.recursiveDeleteRoot) {
        const from = starts.length ? starts : [{ value: '.', literal: true, raw: '.' }];
        denyRootDeletes(from, 'find -delete', ctx, shown, parts);
      }
      if (!/^-(exec|execdir|ok|okdir)$/.test(v)) continue;
      const end = args.findIndex((a, j) => j > i && (a.value === ';' || a.value === '+'));
      const innerWords = args.slice(i + 1, end < 0 ? args.length : end);
      i = end < 0 ? args.length : end;
      if (innerWords.length === 0) continue;
      const synthetic: SimpleCommand = {
        text: innerWords.map((w) => w.raw).join(' '),
        words: innerWords.map((w) => w.value),
        // `{}` is a file name find supplies at run time.
        literal: innerWords.map((w) => w.literal && !w.value.includes('{}')),
        rawWords: innerWords.map((w) => w.raw),
        assignments: [],
        redirects: [],
        nested: true,
        inSubstitution: false,
        start: 0,
        end: 0,
        name: innerWords[0]!.value,
      };
      const r = this.simple(synthetic, { cwd: undefined, depth: scope.depth });
      for (const p of r.parts) parts.push({ ...p, command: `${shown} → ${p.command}` });
      if (
        r.final?.base === 'rm' &&
        this.o.safety.recursiveDeleteRoot &&
        r.final.args.some((a) => /^-[A-Za-z]*[rR]/.test(a.value))
      ) {
        denyRootDeletes(starts, 'find -exec rm -r', ctx, shown, parts);
      }
    }
  }

  /** A command string a wrapper hands to a shell: parsed recursively, bounded in depth. */
  private nestedLine(script: Word, via: string, shown: string, scope: Scope): Part[] {
    if (!script.literal) {
      const parts: Part[] = [
        {
          command: shown,
          verdict: 'ask',
          reason: `${via} runs a command string that is only known at run time (${short(script.raw)})`,
          rule: 'failClosed:dynamicScript',
        },
      ];
      if (this.o.safety.privilegeEscalation && PRIVILEGE_WORD.test(script.raw))
        parts.push({
          command: shown,
          verdict: 'deny',
          reason: `${via} runs a command string that mentions a privilege-escalation program`,
          rule: 'safety:privilegeEscalation',
        });
      return parts;
    }
    if (scope.depth >= this.o.maxNesting) {
      return [
        {
          command: shown,
          verdict: 'ask',
          reason: `${via} strings are nested deeper than ${this.o.maxNesting} levels`,
          rule: 'failClosed:nesting',
        },
      ];
    }
    return this.analyzeLine(script.value, { cwd: scope.cwd, depth: scope.depth + 1 }).map((p) => ({
      ...p,
      command: p.command === short(script.value) ? `${via} -c ${p.command}` : p.command,
    }));
  }
}

function summarize(parts: Part[]): Analysis {
  if (parts.length === 0) {
    const empty: Part = {
      command: '',
      verdict: 'allow',
      reason: 'the command is empty',
      rule: 'readOnly:empty',
    };
    return { verdict: 'allow', decisive: empty, parts: [empty] };
  }
  let decisive = parts[0]!;
  for (const p of parts) if (RANK[p.verdict] > RANK[decisive.verdict]) decisive = p;
  return { verdict: decisive.verdict, decisive, parts };
}

function toWords(command: SimpleCommand): Word[] {
  return command.words.map((value, i) => ({
    value,
    literal: command.literal[i] ?? false,
    raw: command.rawWords[i] ?? value,
  }));
}

function positionalArgs(args: Word[]): Word[] {
  const out: Word[] = [];
  let options = true;
  for (const a of args) {
    if (options && a.literal && a.value === '--') {
      options = false;
      continue;
    }
    if (options && a.literal && a.value.startsWith('-') && a.value !== '-') continue;
    out.push(a);
  }
  return out;
}

function writeTarget(r: Redirect): string | undefined {
  if (r.target === undefined) return undefined;
  const op = r.operator;
  if (op === '>&' || op === '<&' || op === '>&-' || op === '<&-') {
    if (/^(\d+|-)$/.test(r.target) || !r.targetLiteral)
      return op === '>&' && !/^(\d+|-)$/.test(r.target) ? r.target : undefined;
    return op === '>&' ? r.target : undefined;
  }
  if (!OUTPUT_OPERATORS.has(op)) return undefined;
  if (r.targetLiteral && HARMLESS_TARGETS.test(r.target)) return undefined;
  return r.target;
}

function inside(abs: string, dir: string): boolean {
  return abs === dir || abs.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

function continuationInsideWord(source: string): boolean {
  for (let at = source.indexOf('\\\n'); at >= 0; at = source.indexOf('\\\n', at + 2)) {
    const before = source[at - 1];
    const after = source[at + 2];
    if (before !== undefined && !/\s/.test(before) && after !== undefined && !/\s/.test(after)) return true;
  }
  return false;
}

const GIT_EXEC_KEYS =
  /^(core\.(pager|editor|hookspath|fsmonitor|sshcommand|askpass|gitproxy)|diff\..*\.(textconv|command)|diff\.external|merge\..*\.driver|filter\..*|alias\..*|credential\..*helper|credential\.helper|gpg\.program|gpg\..*\.program|sequence\.editor|include\.path|includeif\..*|uploadpack\..*|receive\..*|pager\..*|web\.browser|browser\..*\.cmd|sendemail\..*cmd|remote\..*\.(uploadpack|receivepack|proxy))$/i;

/** `git config <exec-key> <value>` or `git -c <exec-key>=...`: which key, when one runs programs. */
function gitConfigDanger(args: Word[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const v = args[i]!.value;
    if (v === '-c' && args[i + 1]) {
      const key = args[i + 1]!.value.split('=')[0]!;
      if (GIT_EXEC_KEYS.test(key)) return undefined; // -c is per-invocation: asked, not a config write
      i++;
      continue;
    }
    if (v.startsWith('-')) {
      if (v === '-C') i++;
      continue;
    }
    if (v !== 'config') return undefined;
    const rest = args.slice(i + 1).filter((a) => !a.value.startsWith('-'));
    const readOnly = args
      .slice(i + 1)
      .some((a) => /^--(get|get-all|get-regexp|list|show-origin|unset|unset-all)$|^-l$/.test(a.value));
    if (readOnly) return undefined;
    const key = rest[0]?.value === 'set' ? rest[1]?.value : rest[0]?.value;
    const hasValue = rest[0]?.value === 'set' ? rest.length >= 3 : rest.length >= 2;
    if (key && hasValue && GIT_EXEC_KEYS.test(key)) return key;
    return undefined;
  }
  return undefined;
}

/** A host rule that would allow this command: exact for short commands, else a prefix. */
export function suggestRule(words: Word[]): string | undefined {
  if (words.length === 0 || !words.every((w) => w.literal)) return undefined;
  const values = words.map((w) => w.value);
  if (values.some((v) => /[\s*]/.test(v))) {
    const head = values.slice(
      0,
      values.findIndex((v) => /[\s*]/.test(v)),
    );
    return head.length ? `${head.join(' ')}:*` : undefined;
  }
  if (values.length <= 3) return values.join(' ');
  const head = [values[0]!];
  for (const v of values.slice(1, 3)) {
    if (/^[A-Za-z][\w:.-]*$/.test(v)) head.push(v);
    else break;
  }
  return `${head.join(' ')}:*`;
}

function short(text: string): string {
  const oneLine = text.length > 200 ? `${text.slice(0, 200)}… (${text.length} chars)` : text;
  return oneLine;
}

/** Adds a deny for each start path of a recursive delete that resolves to /, ~ or the workspace root. */
function denyRootDeletes(
  starts: readonly Word[],
  what: string,
  ctx: PathContext,
  shown: string,
  parts: Part[],
) {
  for (const s of starts) {
    const abs = expandKnown(s.value, s.literal, ctx);
    const full = abs === undefined ? undefined : absolute(abs, ctx);
    const root = full && isRootLike(full, ctx);
    if (root)
      parts.push({
        command: shown,
        verdict: 'deny',
        reason: `${what} would delete everything in ${root}`,
        rule: 'safety:recursiveDeleteRoot',
      });
  }
}
