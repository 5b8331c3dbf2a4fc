// Command templates end to end (registry.execute -> gate -> compose -> cli runner -> spawn) against
// a raw node:child_process spawn of /bin/sh running the same steps with the argument inlined.
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { PluginRegistry } from '@conch/core';
import { allowAll } from './helpers/provide.mjs';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin, definePluginFromTemplates } from '@conch/cli';
import { z } from 'zod';
import { alternate } from '../lib.mjs';

function rawSh(script, env) {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'], env });
    child.stdout.on('data', () => {});
    child.stderr.on('data', () => {});
    child.on('error', reject);
    child.on('close', resolve);
  });
}

const plugin = definePluginFromTemplates({
  name: 'bench-templates',
  version: '0',
  tools: [
    {
      name: 'one_step',
      description: 'one step',
      inputSchema: z.object({ text: z.string() }),
      commands: [{ command: "printf '%s\\n' UTCP_ARG_text_UTCP_END" }],
    },
    {
      name: 'three_steps',
      description: 'three steps with an output reference',
      inputSchema: z.object({ text: z.string() }),
      commands: [
        { command: 'cd .' },
        { command: "printf '%s\\n' UTCP_ARG_text_UTCP_END", append_to_final_output: true },
        { command: 'echo "$CMD_1_OUTPUT"' },
      ],
    },
  ],
});

export default async function () {
  const registry = new PluginRegistry({ plugins: [allowAll, cliPlugin, backgroundPlugin, plugin] });
  await registry.expose('bench-allow-all');
  await registry.expose('cli', {});
  await registry.expose('bench-templates', {});
  const args = { text: 'hello; world' };
  try {
    const check = await registry.execute('three_steps', args);
    if (check.stdout !== 'hello; world\nhello; world\n')
      throw new Error(`unexpected ${JSON.stringify(check)}`);
    const one = await alternate(
      () => registry.execute('one_step', args),
      () => rawSh("printf '%s\\n' 'hello; world'"),
      { runs: 200 },
    );
    const three = await alternate(
      () => registry.execute('three_steps', args),
      () => rawSh('cd .\nX=$(printf \'%s\\n\' \'hello; world\')\necho "$X"\necho "$X"'),
      { runs: 200 },
    );
    return [
      {
        name: 'templates: one-step template vs raw sh -c (median of 200)',
        conch: one.conch,
        baseline: one.baseline,
        unit: 'ms',
        ratio: one.conch / one.baseline,
        goal: 'ratio <= 1.5',
        pass: one.conch / one.baseline <= 1.5,
      },
      {
        name: 'templates: three steps with $CMD_1_OUTPUT vs raw sh -c (median of 200)',
        conch: three.conch,
        baseline: three.baseline,
        unit: 'ms',
        ratio: three.conch / three.baseline,
        goal: 'ratio <= 3',
        pass: three.conch / three.baseline <= 3,
      },
    ];
  } finally {
    await registry.dispose();
  }
}
