// The demo's command line, as `pnpm demo -- ...` (pnpm 10 forwards the `--`) and `node dist/main.js ...` give it.
import { describe, expect, it } from 'vitest';
import { parseDemoArgs } from './args.js';

describe('parseDemoArgs', () => {
  it('skips the leading -- pnpm 10 forwards from `pnpm demo -- --config x.json`', () => {
    expect(parseDemoArgs(['--', '--config', 'x.json', '--plain'])).toMatchObject({
      config: 'x.json',
      plain: true,
    });
    expect(parseDemoArgs(['--config', 'x.json'])).toMatchObject({ config: 'x.json', plain: false });
    expect(parseDemoArgs(['--'])).toMatchObject({ help: false });
  });

  it('still refuses unknown options, and positionals after the --', () => {
    expect(() => parseDemoArgs(['--', '--nope'])).toThrow(/nope/);
    expect(() => parseDemoArgs(['--', 'x.json'])).toThrow();
  });
});
