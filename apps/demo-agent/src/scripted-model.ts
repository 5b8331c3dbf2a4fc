import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4FinishReason,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  LanguageModelV4ToolResultOutput,
  LanguageModelV4Usage,
} from '@ai-sdk/provider';
import { shellQuote } from '@conch/shell-syntax';
import { announcedPort, SERVER_READY, serveCommand, SITE_DIR } from './demo-site.js';
import { blockedReason, displayLine, readResult } from './result-display.js';

/**
 * The offline "scripted demo model": a real AI SDK `LanguageModelV4` (the spec ai 7 calls
 * natively, so no compatibility warning) that needs no network. It reads the conversation like a
 * model would (the user's message, the tool results so far) and answers with a fixed sequence of
 * tool calls, each of which the agent loop really executes through conch. Nothing is faked: the
 * results it talks about are the ones the tools returned.
 *
 * - "walk me through" / the first message: the walkthrough (direct command, pipeline, a slow
 *   command auto-backgrounded and checked, a python REPL through the terminal tool, a file
 *   removed with the terminal's safe `rm` and restored from the trash, a static server started
 *   in a terminal background session with `wait_for` and opened in the headless browser and
 *   screenshotted, a denied `sudo`, an asked command, a long-running background watcher).
 * - `$ <command>`: runs that command with cli_based_tool and reports the result; `$! <command>`
 *   asks to run it outside the sandbox (a human approves it first).
 * - anything else: explains what it can do.
 *
 * It reads results as a host does: whether a call worked from its `display` and `error_code`
 * (result-display.ts); the fields it reads beyond those are content it talks about (stdout, a
 * REPL's output, the line a `wait_for` matched) and ids it passes on (a task, a session, a trash
 * entry).
 */
export interface ScriptedModelOptions {
  /** The cli plugin's autoBackgroundThreshold in seconds, so the narration is true. Default 2. */
  autoBackgroundThreshold?: number;
  /** Delay between streamed words, ms. Default 8 (0 in tests). */
  wordDelayMs?: number;
  /** Directory the asked command creates. Default /tmp/conch-demo. */
  demoDir?: string;
  /** The page the walkthrough serves and opens in the browser. Default: the app's `site/`. */
  siteDir?: string;
}

interface ToolCallPlan {
  toolName: string;
  input: Record<string, unknown>;
}

interface ScriptContext {
  /** Tool outputs of this turn, by step id. */
  results: Map<string, unknown>;
  /** Tools the host offered. */
  tools: ReadonlySet<string>;
  userText: string;
  /** Steps of this script skipped because the host lacks a tool they need. */
  skipped: readonly string[];
}

interface ScriptStep {
  id: string;
  /** Tools this step needs; the step is skipped (with a note) if one is missing. */
  needs?: readonly string[];
  say: (ctx: ScriptContext) => string;
  call?: (ctx: ScriptContext) => ToolCallPlan | undefined;
}

/** It counts no tokens. */
const usage: LanguageModelV4Usage = {
  inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: undefined, text: undefined, reasoning: undefined },
};

function finishReason(unified: 'stop' | 'tool-calls'): LanguageModelV4FinishReason {
  return { unified, raw: unified };
}

export class ScriptedDemoModel implements LanguageModelV4 {
  readonly specificationVersion = 'v4';
  readonly provider = 'conch-demo';
  readonly modelId = 'scripted-demo-model';
  readonly supportedUrls = {};
  private readonly threshold: number;
  private readonly wordDelayMs: number;
  private readonly demoDir: string;
  private readonly siteDir: string;

  constructor(options: ScriptedModelOptions = {}) {
    this.threshold = options.autoBackgroundThreshold ?? 2;
    this.wordDelayMs = options.wordDelayMs ?? 8;
    this.demoDir = options.demoDir ?? '/tmp/conch-demo';
    this.siteDir = options.siteDir ?? SITE_DIR;
  }

  doGenerate(): never {
    throw new Error('the scripted demo model only streams; use streamText');
  }

  async doStream(options: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> {
    const { text, call, stepIndex, scriptId } = this.nextStep(options);
    const signal = options.abortSignal;
    const delay = this.wordDelayMs;
    const stream = new ReadableStream<LanguageModelV4StreamPart>({
      async start(controller) {
        controller.enqueue({ type: 'stream-start', warnings: [] });
        if (text) {
          controller.enqueue({ type: 'text-start', id: 'text' });
          for (const word of text.match(/\S+\s*|\s+/g) ?? []) {
            if (signal?.aborted) break;
            controller.enqueue({ type: 'text-delta', id: 'text', delta: word });
            if (delay > 0) await new Promise((r) => setTimeout(r, delay));
          }
          controller.enqueue({ type: 'text-end', id: 'text' });
        }
        if (call) {
          controller.enqueue({
            type: 'tool-call',
            toolCallId: `scripted-${scriptId}-${stepIndex}-${Math.random().toString(36).slice(2, 8)}`,
            toolName: call.toolName,
            input: JSON.stringify(call.input),
          });
        }
        controller.enqueue({
          type: 'finish',
          finishReason: finishReason(call ? 'tool-calls' : 'stop'),
          usage,
        });
        controller.close();
      },
    });
    return { stream };
  }

  /** Decides the next step of the current turn from the conversation. */
  private nextStep(options: LanguageModelV4CallOptions): {
    text: string;
    call: ToolCallPlan | undefined;
    stepIndex: number;
    scriptId: string;
  } {
    const prompt = options.prompt;
    const lastUser = findLastIndex(prompt, (m) => m.role === 'user');
    const userMessage = prompt[lastUser];
    const userText =
      userMessage?.role === 'user'
        ? userMessage.content.map((p) => (p.type === 'text' ? p.text : '')).join('')
        : '';
    const scriptId = pickScript(userText);
    const script = this.script(scriptId);
    const results = new Map<string, unknown>();
    let lastIndex = -1;
    for (const message of prompt.slice(lastUser + 1)) {
      if (message.role !== 'tool') continue;
      for (const part of message.content) {
        // A tool message also carries approval responses (for provider-executed tools): not ours.
        if (part.type !== 'tool-result') continue;
        const match = /^scripted-(\w+)-(\d+)-/.exec(part.toolCallId);
        if (!match || match[1] !== scriptId) continue;
        const index = Number(match[2]);
        const step = script[index];
        if (step) results.set(step.id, outputValue(part.output));
        lastIndex = Math.max(lastIndex, index);
      }
    }
    const tools = new Set((options.tools ?? []).map((t) => t.name));
    const skipped = script.filter((s) => (s.needs ?? []).some((t) => !tools.has(t))).map((s) => s.id);
    const ctx: ScriptContext = { results, tools, userText, skipped };
    const notes: string[] = [];
    for (let index = lastIndex + 1; index < script.length; index++) {
      const step = script[index]!;
      const missing = (step.needs ?? []).filter((t) => !tools.has(t));
      if (missing.length > 0) {
        notes.push(`(Skipping "${step.id}": the host did not expose ${missing.join(', ')}.)`);
        continue;
      }
      const text = [...notes, step.say(ctx)].filter(Boolean).join('\n');
      const call = step.call?.(ctx);
      if (!call && index < script.length - 1 && step.call) {
        notes.splice(0, notes.length, text);
        continue;
      }
      return { text, call, stepIndex: index, scriptId };
    }
    return { text: notes.join('\n') || 'Done.', call: undefined, stepIndex: script.length, scriptId };
  }

  private script(id: string): ScriptStep[] {
    if (id === 'cmd') return commandScript();
    if (id === 'help') return helpScript();
    return walkthrough(this.threshold, this.demoDir, this.siteDir);
  }
}

function pickScript(userText: string): string {
  if (/^\s*\$\s*\S/.test(userText)) return 'cmd';
  if (/walk|demo|show|tour|again|what can/i.test(userText) || userText.trim() === '') return 'walk';
  return 'help';
}

/** The port the walkthrough's server announced: the line its `wait_for` matched. */
function serverPort(ctx: ScriptContext): number | undefined {
  const serve = ctx.results.get('serve') as
    { wait_for_matched?: unknown; matched_line?: unknown } | undefined;
  return serve?.wait_for_matched === true && typeof serve.matched_line === 'string'
    ? announcedPort(serve.matched_line)
    : undefined;
}

/** Whether a call ran and did what it was asked (a result that is neither a failure nor blocked). */
function succeeded(result: unknown): boolean {
  if (result === undefined) return false;
  const { kind } = readResult(result);
  return kind === 'ok' || kind === 'state';
}

/** The text a terminal command printed (content to talk about). */
function outputOf(result: unknown): string {
  const value = (result as { output?: unknown } | undefined)?.output;
  return typeof value === 'string' ? value : '';
}

/**
 * A web page, end to end: a static server started in a terminal background session, the same
 * call waiting for the line that says where it listens (`wait_for`), opened in the environment's
 * headless browser and screenshotted.
 */
function browserSteps(siteDir: string): ScriptStep[] {
  const browserTools = ['terminal', 'browser_navigate', 'browser_screenshot'];
  return [
    {
      id: 'serve',
      needs: browserTools,
      say: (ctx) => {
        const restored = outputOf(ctx.results.get('trash-cat')).trim();
        return (
          `${restored ? `The file is back and reads "${restored}". ` : ''}` +
          'Now a web page. I start a small static server in a terminal background session, and the same call waits for the line that says where it listens (wait_for). ' +
          'It keeps running while I work, and the process panel shows it next to the headless browser.'
        );
      },
      call: () => ({
        toolName: 'terminal',
        input: { command: serveCommand(siteDir), background: true, wait_for: SERVER_READY },
      }),
    },
    {
      id: 'browse',
      needs: browserTools,
      say: (ctx) => {
        const port = serverPort(ctx);
        return port
          ? `The server listens on port ${port}. I open it in the browser (loopback URLs are on the browser's allowlist, so nobody is asked).`
          : `The server never said where it listens (${displayLine(ctx.results.get('serve')) || 'no result'}), so I leave the browser out.`;
      },
      call: (ctx) => {
        const port = serverPort(ctx);
        return port
          ? { toolName: 'browser_navigate', input: { url: `http://127.0.0.1:${port}/` } }
          : undefined;
      },
    },
    {
      id: 'screenshot',
      needs: browserTools,
      say: (ctx) => {
        const browse = ctx.results.get('browse');
        if (browse === undefined) return '';
        return succeeded(browse)
          ? `The browser loaded it: ${displayLine(browse)}. I take a screenshot.`
          : `The browser could not load it: ${displayLine(browse)}.`;
      },
      call: (ctx) =>
        succeeded(ctx.results.get('browse'))
          ? { toolName: 'browser_screenshot', input: { name: 'conch-demo.png' } }
          : undefined,
    },
  ];
}

/** The id of the newest trash entry the walkthrough's list found. */
function trashEntryId(ctx: ScriptContext): string | undefined {
  const entries = (ctx.results.get('trash-list') as { entries?: unknown } | undefined)?.entries;
  const id = Array.isArray(entries) ? (entries[0] as { id?: unknown } | undefined)?.id : undefined;
  return typeof id === 'string' ? id : undefined;
}

/**
 * `rm` in a terminal session moves to the project's trash: a draft is written and removed (in the
 * sandbox, without a question), found with `trash` list, restored and read back.
 */
function trashSteps(demoDir: string): ScriptStep[] {
  const needs = ['terminal', 'trash'];
  const dir = shellQuote(demoDir);
  const notes = shellQuote(`${demoDir}/notes.txt`);
  return [
    {
      id: 'rm',
      needs,
      say: () =>
        "The terminal's rm is a safe one: it moves what it removes to the project's trash. I write a draft, remove it and list the directory.",
      call: () => ({
        toolName: 'terminal',
        input: {
          command: `mkdir -p ${dir} && printf 'draft v1\\n' > ${notes} && rm ${notes} && ls -A ${dir}`,
        },
      }),
    },
    {
      id: 'trash-list',
      needs,
      say: (ctx) => {
        const rm = ctx.results.get('rm');
        return readResult(rm).kind === 'ok'
          ? 'notes.txt is gone from the listing, but not lost: I look for it in the trash.'
          : `That did not go through (${displayLine(rm) || 'no result'}), so there is nothing to restore.`;
      },
      call: (ctx) =>
        readResult(ctx.results.get('rm')).kind === 'ok'
          ? { toolName: 'trash', input: { action: 'list', path: 'notes.txt' } }
          : undefined,
    },
    {
      id: 'trash-restore',
      needs,
      say: (ctx) => {
        const list = ctx.results.get('trash-list');
        if (list === undefined) return '';
        const id = trashEntryId(ctx);
        return id
          ? `There it is, entry ${id}. I restore it.`
          : `The trash has no notes.txt (${displayLine(list)}), so I move on.`;
      },
      call: (ctx) => {
        const id = trashEntryId(ctx);
        return id ? { toolName: 'trash', input: { action: 'restore', id } } : undefined;
      },
    },
    {
      id: 'trash-cat',
      needs,
      say: (ctx) => {
        const restore = ctx.results.get('trash-restore');
        if (restore === undefined) return '';
        return readResult(restore).kind === 'ok'
          ? `The trash says "${displayLine(restore)}". I read it back.`
          : `It stays in the trash: ${displayLine(restore)}.`;
      },
      call: (ctx) =>
        readResult(ctx.results.get('trash-restore')).kind === 'ok'
          ? { toolName: 'terminal', input: { command: `cat ${notes}` } }
          : undefined,
    },
  ];
}

function walkthrough(threshold: number, demoDir: string, siteDir: string): ScriptStep[] {
  const cli = 'cli_based_tool';
  return [
    {
      id: 'direct',
      needs: [cli],
      say: () =>
        "I'm the scripted demo model: no network, a fixed plan, but every tool call below really runs through conch.\n" +
        'First, a direct command. One simple command with no shell syntax runs as argv, without a shell.',
      call: () => ({ toolName: cli, input: { command: 'uname -sr' } }),
    },
    {
      id: 'pipeline',
      needs: [cli],
      say: (ctx) =>
        `${firstLine(stdoutOf(ctx.results.get('direct'))) ? `The kernel says: ${firstLine(stdoutOf(ctx.results.get('direct')))}. ` : ''}` +
        "Now a pipeline: conch's parser sees the pipes and runs it in a shell.",
      call: () => ({
        toolName: cli,
        input: { command: "printf 'pear\\napple\\nfig\\n' | sort | head -n 2" },
      }),
    },
    {
      id: 'slow',
      needs: [cli],
      say: (ctx) =>
        `${stdoutOf(ctx.results.get('pipeline')) ? `Sorted, first two: ${oneLine(stdoutOf(ctx.results.get('pipeline')))}. ` : ''}` +
        `Next, a slow build. The demo's autoBackgroundThreshold is ${threshold}s, so when it is still running then, ` +
        'conch promotes it to a background task: no restart, no lost output, and I get control back.',
      call: () => ({
        toolName: cli,
        input: { command: 'for i in 1 2 3 4 5; do echo "build step $i"; sleep 1; done; echo build done' },
      }),
    },
    {
      id: 'check',
      needs: ['check_background_task'],
      say: (ctx) => {
        const id = backgroundIdOf(ctx.results.get('slow'));
        return id
          ? `It became background task ${id}. Let me wait for it with check_background_task.`
          : 'It finished before the threshold, so there is nothing to check.';
      },
      call: (ctx) => {
        const id = backgroundIdOf(ctx.results.get('slow'));
        return id
          ? { toolName: 'check_background_task', input: { task_id: id, wait_seconds: 20 } }
          : undefined;
      },
    },
    {
      id: 'repl',
      needs: ['terminal'],
      say: (ctx) => {
        const check = ctx.results.get('check');
        return (
          `${check === undefined ? '' : `The build task says: ${displayLine(check)}. `}` +
          'Interactive programs get a real PTY: the terminal tool starts a python REPL and returns when it waits for input.'
        );
      },
      call: () => ({ toolName: 'terminal', input: { command: 'python3 -q' } }),
    },
    {
      id: 'repl-answer',
      needs: ['terminal'],
      say: (ctx) => {
        const id = sessionIdOf(ctx.results.get('repl'));
        return id
          ? `Session ${id} is waiting at ">>>". I answer it.`
          : 'The REPL did not wait for input, so I skip answering it.';
      },
      call: (ctx) => {
        const id = sessionIdOf(ctx.results.get('repl'));
        return id !== undefined
          ? { toolName: 'terminal', input: { session_id: id, input: 'print(6 * 7)\n' } }
          : undefined;
      },
    },
    {
      id: 'repl-exit',
      needs: ['terminal'],
      say: (ctx) => {
        const out = (ctx.results.get('repl-answer') as { output?: string } | undefined)?.output ?? '';
        if (sessionIdOf(ctx.results.get('repl')) === undefined) return '';
        return `${/\b42\b/.test(out) ? 'Python answered 42. ' : ''}Now I leave the REPL.`;
      },
      call: (ctx) => {
        const id = sessionIdOf(ctx.results.get('repl'));
        return id !== undefined
          ? { toolName: 'terminal', input: { session_id: id, input: 'exit()\n' } }
          : undefined;
      },
    },
    ...trashSteps(demoDir),
    ...browserSteps(siteDir),
    {
      id: 'sudo',
      needs: [cli],
      say: (ctx) => {
        // The screenshot's display is `<path> (<width>x<height>)`.
        const shot = ctx.results.get('screenshot');
        return (
          `${succeeded(shot) ? `Saved ${displayLine(shot)}. ` : ''}` +
          'Some commands must never run on your behalf. Here I try to sneak sudo into a command substitution:'
        );
      },
      call: () => ({ toolName: cli, input: { command: 'echo "$(sudo id -u)"' } }),
    },
    {
      id: 'asked',
      needs: [cli],
      say: (ctx) => {
        const sudo = ctx.results.get('sudo');
        return (
          `${readResult(sudo).kind === 'blocked' ? `Refused: ${sentence(blockedReason(sudo))} ` : ''}` +
          (ranInSandbox(ctx)
            ? 'Everything else so far ran without a question, inside the sandbox: it can write only in the workspace and reach only allowed hosts. '
            : 'There is no sandbox on this machine, so everything that is not provably read-only is asked. ') +
          'A command that must leave the sandbox (a system install, a file elsewhere) is asked first. I ask to run this one outside it:'
        );
      },
      call: () => ({
        toolName: cli,
        input: {
          command: `mkdir -p ${demoDir} && date > ${demoDir}/approved.txt && cat ${demoDir}/approved.txt`,
          sandbox: false,
          justification: 'The walkthrough shows that a command leaving the sandbox is asked first.',
        },
      }),
    },
    {
      id: 'watch',
      needs: [cli],
      say: (ctx) => {
        const asked = ctx.results.get('asked');
        const kind = asked === undefined ? undefined : readResult(asked).kind;
        const verdict =
          kind === 'blocked'
            ? 'You said no, so it did not run. '
            : kind === 'ok'
              ? 'You approved it and it ran. '
              : kind === 'failed'
                ? `You approved it, but it failed: ${displayLine(asked)}. `
                : '';
        return (
          verdict +
          'Last, a long-running watcher started in the background. It shows in the process panel; ' +
          'try !ps, !logs <id> and !kill <id>.'
        );
      },
      call: () => ({
        toolName: cli,
        input: { command: 'while true; do date +%T; sleep 2; done', background: true },
      }),
    },
    {
      id: 'end',
      say: (ctx) => {
        const id = backgroundIdOf(ctx.results.get('watch'));
        return (
          `${id ? `The watcher is background task ${id}. ` : ''}` +
          (ctx.skipped.length
            ? `That's the walkthrough, with ${ctx.skipped.length} steps skipped because their plugins are not exposed.\n`
            : "That's the walkthrough: walkthrough complete.\n") +
          'Type `$ <command>` to run a command through me, or !help for the process commands.'
        );
      },
    },
  ];
}

function commandScript(): ScriptStep[] {
  return [
    {
      id: 'run',
      needs: ['cli_based_tool'],
      say: () => '',
      call: (ctx) => ({
        toolName: 'cli_based_tool',
        input: /^\s*\$!/.test(ctx.userText)
          ? {
              command: ctx.userText.replace(/^\s*\$!\s*/, ''),
              sandbox: false,
              justification: 'You typed $!, which runs a command outside the sandbox.',
            }
          : { command: ctx.userText.replace(/^\s*\$\s*/, '') },
      }),
    },
    {
      id: 'report',
      say: (ctx) => {
        const result = ctx.results.get('run');
        if (result === undefined) return 'No result.';
        const { kind } = readResult(result);
        if (kind === 'blocked') return `Not run: Permission denied: ${blockedReason(result)}`;
        const id = backgroundIdOf(result);
        if (kind === 'state' && id) return `It is running in the background as ${id}.`;
        return `Result: ${displayLine(result)}`;
      },
    },
  ];
}

function helpScript(): ScriptStep[] {
  return [
    {
      id: 'help',
      say: () =>
        'I am the scripted demo model, so I only follow a script. Type "walk me through it" for the walkthrough, ' +
        '`$ <command>` to run a command through conch, or configure a real model (OPENAI_API_KEY, OPENAI_BASE_URL ' +
        'or ANTHROPIC_API_KEY, see the README).',
    },
  ];
}

/** Whether a command of this turn ran in the workspace sandbox (its result says where it ran). */
function ranInSandbox(ctx: ScriptContext): boolean {
  for (const result of ctx.results.values())
    if ((result as { sandbox?: unknown } | undefined)?.sandbox === 'workspace-write') return true;
  return false;
}

function outputValue(output: LanguageModelV4ToolResultOutput): unknown {
  if (output.type === 'json' || output.type === 'error-json') return output.value;
  // A failed conch call arrives as error text: its whole result, as JSON (@conch/ai-sdk).
  if (output.type === 'error-text')
    try {
      return JSON.parse(output.value) as unknown;
    } catch {
      return { text: output.value };
    }
  if (output.type === 'text') return { text: output.value };
  return undefined;
}

function stdoutOf(result: unknown): string {
  const value = (result as { stdout?: unknown } | undefined)?.stdout;
  return typeof value === 'string' ? value : '';
}

function backgroundIdOf(result: unknown): string | undefined {
  const value = (result as { background_task_id?: unknown } | undefined)?.background_task_id;
  return typeof value === 'string' ? value : undefined;
}

function sessionIdOf(result: unknown): number | string | undefined {
  const value = (result as { session_id?: unknown } | undefined)?.session_id;
  return typeof value === 'string' || typeof value === 'number' ? value : undefined;
}

/** `text` ending in a full stop (unless it ends a sentence already). */
function sentence(text: string): string {
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

function firstLine(text: string): string {
  return text.split('\n')[0]?.trim() ?? '';
}

function oneLine(text: string): string {
  return text.trim().split('\n').join(', ');
}

function findLastIndex(
  prompt: LanguageModelV4Prompt,
  test: (m: LanguageModelV4Prompt[number]) => boolean,
): number {
  for (let i = prompt.length - 1; i >= 0; i--) if (test(prompt[i]!)) return i;
  return -1;
}
