// Invariant: the agent loop streams, runs real tool calls and feeds results back, survives tool and model errors, and an abort kills the running tool's processes and leaves a valid history.
import 'reflect-metadata';
import { PluginRegistry } from '@conch/core';
import { descendants, isAlive, waitFor } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { Agent, type AgentHandlers } from './agent.js';
import { ChatController } from './chat.js';
import { ApprovalQueue } from './approvals.js';
import { ProcessTracker } from './processes.js';
import { mockModel, textStep, toolCallStep } from './test-support/mock-model.js';
import { sdkWarningsDuring } from './test-support/sdk-warnings.js';
import { shellPlugin, shTool, startedPids } from './test-support/shell-plugin.js';

let registry: PluginRegistry | undefined;

afterEach(async () => {
  await registry?.dispose();
  registry = undefined;
});

function makeRegistry(): PluginRegistry {
  registry = new PluginRegistry({ plugins: [shellPlugin] });
  registry.exposeSync('test-shell');
  return registry;
}

function recorder() {
  const events: string[] = [];
  const handlers: AgentHandlers = {
    onText: (d) => events.push(`text:${d}`),
    onToolCall: (c) => events.push(`call:${c.name}`),
    onToolResult: (r) => events.push(`result:${r.name}:${r.isError ? 'error' : 'ok'}`),
    onToolError: (e) => events.push(`tool-error:${e.name}`),
    onError: (m) => events.push(`error:${m}`),
  };
  return { events, handlers };
}

describe('Agent', () => {
  it('streams text, runs a real tool call, and sends its result to the next step', async () => {
    const reg = makeRegistry();
    const { model, calls } = mockModel([
      toolCallStep([{ id: 'c1', name: 'sh', input: { command: 'echo from-a-real-shell' } }], 'Running it.'),
      textStep('It printed from-a-real-shell.'),
    ]);
    const agent = new Agent({ model, registry: reg });
    const { events, handlers } = recorder();
    expect(await agent.run('run it', new AbortController().signal, handlers)).toBe('done');
    expect(events).toEqual([
      'text:Running it.',
      'call:sh',
      'result:sh:ok',
      'text:It printed from-a-real-shell.',
    ]);
    const toolMessage = calls[1]?.prompt.find((m) => m.role === 'tool');
    expect(JSON.stringify(toolMessage)).toContain('from-a-real-shell\\n');
    // History: user, assistant (text + call), tool result, assistant text: every step's messages.
    expect(agent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    // ai 7's shape: the call and its result are parts; the result is the output the model read.
    expect(agent.messages[1]).toMatchObject({
      role: 'assistant',
      content: expect.arrayContaining([
        expect.objectContaining({ type: 'tool-call', toolCallId: 'c1', toolName: 'sh' }),
      ]),
    });
    expect(agent.messages[2]).toMatchObject({
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'c1',
          toolName: 'sh',
          output: { type: 'json', value: { stdout: 'from-a-real-shell\n', returncode: 0 } },
        },
      ],
    });
    // The system prompt includes the base prompt; tools are offered with their schemas.
    expect(calls[0]?.tools?.map((t) => t.name)).toEqual(['sh']);
  });

  it('keeps the conversation across turns', async () => {
    const reg = makeRegistry();
    const { model, calls } = mockModel([textStep('one'), textStep('two')]);
    const agent = new Agent({ model, registry: reg });
    await agent.run('first', new AbortController().signal);
    await agent.run('second', new AbortController().signal);
    const roles = calls[1]?.prompt.map((m) => m.role);
    expect(roles).toEqual(['system', 'user', 'assistant', 'user']);
  });

  it("sends the earlier turns' tool calls and results (ok and failed) back to the model", async () => {
    const reg = makeRegistry();
    const { model, calls } = mockModel([
      toolCallStep([
        { id: 'ok', name: 'sh', input: { command: 'echo turn-one' } },
        { id: 'bad', name: 'sh', input: { command: 7 } },
      ]),
      textStep('one'),
      textStep('two'),
    ]);
    const agent = new Agent({ model, registry: reg });
    expect(await agent.run('first', new AbortController().signal)).toBe('done');
    expect(await agent.run('second', new AbortController().signal)).toBe('done');
    const prompt = calls[2]!.prompt;
    expect(prompt.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'user']);
    const results = prompt.flatMap((m) =>
      m.role === 'tool' ? m.content.filter((p) => p.type === 'tool-result') : [],
    );
    expect(results.map((r) => [r.toolCallId, r.output.type])).toEqual([
      ['ok', 'json'],
      ['bad', 'error-text'],
    ]);
    expect(results[0]!.output).toMatchObject({ value: { stdout: 'turn-one\n' } });
    // A failed conch call is its whole result as JSON error text (@conch/ai-sdk).
    const failed = results[1]!.output as { value: string };
    expect(JSON.parse(failed.value)).toMatchObject({ error_code: 'INVALID_ARGUMENTS' });
  });

  it('bad arguments come back as an error result and the loop goes on; an unknown tool is a tool error', async () => {
    const reg = makeRegistry();
    const { model, calls } = mockModel([
      toolCallStep([
        { id: 'bad', name: 'sh', input: { command: 7 } },
        { id: 'nope', name: 'no_such_tool', input: {} },
      ]),
      textStep('I will fix that.'),
    ]);
    const agent = new Agent({ model, registry: reg });
    const { events, handlers } = recorder();
    expect(await agent.run('x', new AbortController().signal, handlers)).toBe('done');
    expect(events).toContain('result:sh:error');
    expect(events).toContain('tool-error:no_such_tool');
    expect(events.at(-1)).toBe('text:I will fix that.');
    const sent = JSON.stringify(calls[1]?.prompt);
    expect(sent).toContain('INVALID_ARGUMENTS');
  });

  it('a model error ends the turn with an error outcome, and the next turn still works', async () => {
    const reg = makeRegistry();
    const { model } = mockModel([
      () => {
        throw new Error('provider unreachable');
      },
      textStep('back again'),
    ]);
    const agent = new Agent({ model, registry: reg });
    const { events, handlers } = recorder();
    expect(await agent.run('x', new AbortController().signal, handlers)).toBe('error');
    expect(events).toEqual(['error:provider unreachable']);
    expect(await agent.run('y', new AbortController().signal)).toBe('done');
    expect(agent.messages.at(-1)).toMatchObject({ role: 'assistant' });
  });

  it('abort kills the running tool and its process tree, and the history stays valid', async () => {
    const reg = makeRegistry();
    startedPids.length = 0;
    const { model, calls } = mockModel([
      toolCallStep([{ id: 'slow', name: 'sh', input: { command: 'sleep 300 & sleep 300; wait' } }]),
      textStep('after the abort'),
    ]);
    const agent = new Agent({ model, registry: reg });
    const controller = new AbortController();
    const turn = agent.run('x', controller.signal);
    await waitFor(() => startedPids.length === 1, { what: 'the tool to start', timeoutMs: 30_000 });
    const pid = startedPids[0]!;
    // Wait until the shell has its two children, then abort.
    await waitFor(() => descendants(pid).length >= 1, { what: 'the sleeps to start', timeoutMs: 30_000 });
    const children = descendants(pid);
    controller.abort();
    expect(await turn).toBe('aborted');
    await waitFor(() => !isAlive(pid) && children.every((c) => !isAlive(c)), {
      what: 'the tree to die',
      timeoutMs: 30_000,
    });
    expect(await agent.run('go on', new AbortController().signal)).toBe('done');
    expect(calls.at(-1)?.prompt.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
  });
});

describe('ChatController', () => {
  it('turns a turn into items with tool status, and Ctrl+C cancels the running tool', async () => {
    const reg = makeRegistry();
    startedPids.length = 0;
    const { model } = mockModel([
      toolCallStep([{ id: 'a', name: 'sh', input: { command: 'echo quick' } }], 'First a quick one.'),
      toolCallStep([{ id: 'b', name: 'sh', input: { command: 'sleep 300' } }]),
      textStep('unreachable'),
    ]);
    const tracker = new ProcessTracker(reg);
    const chat = new ChatController({
      agent: new Agent({ model, registry: reg }),
      tracker,
      approvals: new ApprovalQueue(),
      onLogs: () => {},
      onExit: () => {},
    });
    const done = chat.submit('go');
    await waitFor(() => startedPids.length === 2, { what: 'the slow tool', timeoutMs: 30_000 });
    expect(chat.busy).toBe(true);
    expect(chat.cancel()).toBe(true);
    await done;
    expect(chat.busy).toBe(false);
    const tools = chat.items.filter((i) => i.kind === 'tool');
    expect(tools.map((t) => [t.summary, t.status])).toEqual([
      ['echo quick', 'ok'],
      ['sleep 300', 'aborted'],
    ]);
    expect(chat.items.some((i) => i.kind === 'info' && /cancelled/.test(i.text))).toBe(true);
    await waitFor(() => !isAlive(startedPids[1]!), { what: 'sleep to die', timeoutMs: 30_000 });
    tracker.dispose();
  });

  it('runs ! commands without the model, and rejects unknown ones with the help', async () => {
    const reg = makeRegistry();
    const tracker = new ProcessTracker(reg);
    const { model, calls } = mockModel([textStep('x')]);
    const chat = new ChatController({
      agent: new Agent({ model, registry: reg }),
      tracker,
      approvals: new ApprovalQueue(),
      onLogs: () => {},
      onExit: () => {},
    });
    await chat.submit('!ps');
    await chat.submit('!frobnicate');
    await chat.submit('!kill nope');
    expect(calls).toHaveLength(0);
    const texts = chat.items.map((i) => ('text' in i ? `${i.kind}:${i.text.split('\n')[0]}` : i.kind));
    expect(texts).toEqual([
      'command:!ps',
      'info:no processes, background tasks or terminal sessions',
      'command:!frobnicate',
      "error:unknown command '!frobnicate'",
      'command:!kill nope',
      "error:no process, background task or terminal session has id 'nope'; see !ps",
    ]);
    tracker.dispose();
  });
});

describe('ScriptedDemoModel', () => {
  it('skips, and says so, the steps whose tools the host did not expose', async () => {
    const { ScriptedDemoModel } = await import('./scripted-model.js');
    const reg = makeRegistry();
    const agent = new Agent({ model: new ScriptedDemoModel({ wordDelayMs: 0 }), registry: reg });
    let text = '';
    expect(
      await agent.run('walk me through it', new AbortController().signal, { onText: (d) => (text += d) }),
    ).toBe('done');
    expect(text).toContain('Skipping "direct": the host did not expose cli_based_tool');
    expect(text).toMatch(/steps skipped because their plugins are not exposed/);
    expect(text).not.toContain('walkthrough complete');
  });

  /** The scripted model over a registry whose shell tool is exposed as cli_based_tool. */
  async function scriptedShellAgent(): Promise<Agent> {
    const { ScriptedDemoModel } = await import('./scripted-model.js');
    const reg = new PluginRegistry({
      plugins: [{ ...shellPlugin, name: 'renamed', tools: [{ ...shTool, name: 'cli_based_tool' }] }],
    });
    registry = reg;
    reg.exposeSync('renamed');
    return new Agent({ model: new ScriptedDemoModel({ wordDelayMs: 0 }), registry: reg });
  }

  it('runs `$ <command>` through the tool it names and reports the result it got', async () => {
    const agent = await scriptedShellAgent();
    let text = '';
    const results: unknown[] = [];
    await agent.run('$ echo scripted', new AbortController().signal, {
      onText: (d) => (text += d),
      onToolResult: (r) => results.push(r.output),
    });
    expect(results).toEqual([{ stdout: 'scripted\n', returncode: 0, display: '✓' }]);
    expect(text).toBe('Result: ✓');
  });

  it('reads a failed call from its error text and reports what it says', async () => {
    const agent = await scriptedShellAgent();
    let text = '';
    const results: { output: unknown; isError: boolean }[] = [];
    // `$!` adds `sandbox` and `justification`, which this strict test tool refuses.
    expect(
      await agent.run('$! echo outside', new AbortController().signal, {
        onText: (d) => (text += d),
        onToolResult: (r) => results.push(r),
      }),
    ).toBe('done');
    expect(results).toEqual([
      expect.objectContaining({
        output: expect.objectContaining({ error_code: 'INVALID_ARGUMENTS' }),
        isError: true,
      }),
    ]);
    const display = (results[0]!.output as { display: string }).display;
    expect(display).toMatch(/^✗ INVALID_ARGUMENTS/);
    expect(text).toBe(`Result: ${display}`);
  });

  it('speaks the language model spec ai 7 calls natively, so the SDK logs no compatibility warning', async () => {
    const { ScriptedDemoModel } = await import('./scripted-model.js');
    const model = new ScriptedDemoModel({ wordDelayMs: 0 });
    expect(model.specificationVersion).toBe('v4');
    const reg = makeRegistry();
    const warnings = await sdkWarningsDuring(async () => {
      const agent = new Agent({ model, registry: reg });
      expect(await agent.run('walk me through it', new AbortController().signal)).toBe('done');
      const mock = mockModel([
        toolCallStep([{ id: 'c', name: 'sh', input: { command: 'true' } }]),
        textStep('ok'),
      ]);
      expect(
        await new Agent({ model: mock.model, registry: reg }).run('x', new AbortController().signal),
      ).toBe('done');
    });
    expect(warnings).toEqual([]);
  });
});

describe('!kill-all', () => {
  it('ends background tasks, terminal sessions and every process (the browser included), naming each', async () => {
    const { backgroundPlugin } = await import('@conch/background');
    const { cliPlugin } = await import('@conch/cli');
    const { permissionPlugin } = await import('@conch/permission');
    const { terminalPlugin } = await import('@conch/terminal');
    const { PROCESS_MANAGER } = await import('@conch/process');
    const reg = new PluginRegistry({
      plugins: [permissionPlugin, cliPlugin, backgroundPlugin, terminalPlugin],
    });
    registry = reg;
    await reg.expose('permission', { mode: 'acceptAll', sandbox: 'off' });
    await reg.expose('cli');
    await reg.expose('terminal');
    const tracker = new ProcessTracker(reg);
    const task = (await reg.execute('cli_based_tool', { command: 'sleep 300', background: true })) as {
      background_task_id: string;
    };
    const session = (await reg.execute('terminal', { command: 'sleep 300', background: true })) as {
      session_id: number;
    };
    // A stand-in for the browser: a process whose label is the browser's.
    const manager = reg.resolve(PROCESS_MANAGER);
    const browser = manager.spawn('sleep', ['300'], { label: '[browser] Chrome Headless  CDP Ready ws://x' });
    await browser.spawned;
    const pids = manager
      .list()
      .filter((p) => p.isRunning && p.pid !== undefined)
      .map((p) => p.pid!);
    expect(pids.length).toBeGreaterThanOrEqual(2);
    const said = await tracker.killAll();
    expect(said, said).toMatch(/1 browser \(p\d+\)/);
    expect(said).toContain(`1 background task (${task.background_task_id})`);
    expect(said).toContain(`1 terminal session (t${session.session_id})`);
    for (const pid of pids)
      await waitFor(() => !isAlive(pid), { what: `pid ${pid} to end`, timeoutMs: 30_000 });
    expect(await tracker.killAll()).toBe('nothing was running');
    tracker.dispose();
  });
});
