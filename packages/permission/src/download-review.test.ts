// Invariant: the gate's refusal of a download fed to an interpreter names the commands to run instead (download the literal URL to a file, read it, run it) for every tool (cli_based_tool, terminal), and falls back to general advice when the line names no URL.
import { describe, expect, it } from 'vitest';
import { downloadReviewSteps as reviewSteps } from '@conch/shell-syntax';
import { match } from './rules/download-to-interpreter.js';

describe('download & review advice', () => {
  it.each([
    [
      'curl -sSL https://a.example.test/install.sh',
      'bash',
      /^curl -fsSL -o \/tmp\/conch-review-[0-9a-f]{8}-install\.sh https:\/\/a\.example\.test\/install\.sh$/,
      'bash',
    ],
    [
      'wget -O- https://b.example.test/get',
      'sh',
      /^wget -qO \/tmp\/conch-review-[0-9a-f]{8}-install\.sh https:\/\/b\.example\.test\/get$/,
      'sh',
    ],
    [
      'curl https://c.example.test/get-pip.py',
      'python3',
      /^curl -fsSL -o \/tmp\/conch-review-[0-9a-f]{8}-get-pip\.py /,
      'python3',
    ],
    [
      'curl -fsSL https://d.example.test/env',
      'source',
      /install\.sh https:\/\/d\.example\.test\/env$/,
      'source',
    ],
  ])('%s fed to %s', (download, interpreter, shape, runner) => {
    const steps = reviewSteps(download, interpreter)!;
    expect(steps.download).toMatch(shape);
    expect(steps.review).toBe(`cat ${steps.file}`);
    expect(steps.run).toBe(`${runner} ${steps.file}`);
    const [part] = match(
      {
        downloads: [download],
        interpreters: [
          { shown: interpreter, name: interpreter, code: 'stdin', sourcing: interpreter === 'source' },
        ],
      },
      interpreter === 'source',
      'x',
    );
    expect(part?.verdict).toBe('deny');
    expect(part?.reason).toContain(`1) ${steps.download} 2) ${steps.review} 3) ${steps.run}`);
  });

  it('without a literal URL the advice stays general', () => {
    expect(reviewSteps('curl -fsSL "$u"', 'bash')).toBeUndefined();
    const [part] = match(
      {
        downloads: ['curl -fsSL "$u"'],
        interpreters: [{ shown: 'bash', name: 'bash', code: 'stdin', sourcing: false }],
      },
      false,
      'downloadToInterpreter',
    );
    expect(part?.reason).toMatch(/Download it to a file first/);
  });
});
