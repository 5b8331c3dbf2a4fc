// Invariant: the permission plugin validates its config strictly — a bad field, a rule that does not compile or a rule whose examples fail is a load error naming that rule.
import 'reflect-metadata';
import { InvalidConfigError, PluginRegistry, TOKENS } from '@conch/core';
import { waitFor } from '@conch/test-support';
import { describe, expect, it } from 'vitest';
import { PermissionEngine } from './gate.js';
import { getPermissionEngine, permissionPlugin } from './plugin.js';

function expose(config: unknown) {
  const registry = new PluginRegistry({ plugins: [permissionPlugin] });
  registry.exposeSync('permission', config);
  return registry;
}

function loadError(config: unknown): InvalidConfigError {
  try {
    expose(config);
  } catch (error) {
    expect(InvalidConfigError.isInstance(error)).toBe(true);
    return error as InvalidConfigError;
  }
  throw new Error('expected an InvalidConfigError');
}

describe('permission plugin config', () => {
  it('registers one engine as the gate, with no model tools', async () => {
    const registry = expose({});
    expect(registry.tools()).toEqual([]);
    const engine = getPermissionEngine(registry);
    expect(engine).toBeInstanceOf(PermissionEngine);
    expect(registry.resolve(TOKENS.PermissionGate)).toBe(engine);
    await registry.dispose();
  });

  it('accepts snake_case keys', async () => {
    const registry = expose({ protected_paths: ['secrets/**'], workspace_root: '.' });
    expect(getPermissionEngine(registry)!.evaluate('echo x > secrets/a').verdict).toBe('deny');
    await registry.dispose();
  });

  it('names the field, what was expected and what was given', () => {
    expect(loadError({ mode: 'yolo' }).message).toMatch(/mode/);
    expect(loadError({ rules: { allow: [42] } }).message).toMatch(/rules\.allow\.0|rules\.allow\[0\]/);
    expect(loadError({ colour: 'red' }).message).toMatch(/colour/);
    expect(loadError({ approve: 'yes' }).message).toMatch(/approve/);
  });

  it('a rule whose examples fail is a load error naming the rule', () => {
    const error = loadError({
      rules: {
        allow: ['ls', { pattern: 'npm run test:*', examples: { match: ['npm test'], notMatch: [] } }],
      },
    });
    expect(error.message).toMatch(/rules\.allow\.1\.examples\.match\.0|rules\.allow\[1\]/);
    expect(error.message).toMatch(/rule "npm run test:\*" does not match its example "npm test"/);
  });

  it('a rule that does not compile is a load error naming it', () => {
    expect(loadError({ rules: { deny: ['git * push'] } }).message).toMatch(/only allowed at the end/);
    expect(loadError({ rules: { deny: [{ regex: '(' }] } }).message).toMatch(/invalid regex/);
  });
});

describe('the warm-up judgement', () => {
  /** The commands an engine is asked to evaluate from now on. */
  const evaluated = (engine: PermissionEngine) => {
    const seen: string[] = [];
    const evaluate = engine.evaluate.bind(engine);
    engine.evaluate = (command, ...rest) => {
      seen.push(command);
      return evaluate(command, ...rest);
    };
    return seen;
  };

  it("runs once after expose; registry.status() says 'pending', then 'done'", async () => {
    const registry = expose({});
    const seen = evaluated(getPermissionEngine(registry)!);
    expect((await registry.status()).permission).toMatchObject({ warmUp: 'pending' });
    const warmUp = async () =>
      ((await registry.status()).permission as { warmUp?: string } | undefined)?.warmUp;
    await waitFor(async () => (await warmUp()) === 'done', 'the warm-up');
    expect(seen).toHaveLength(1);
    // The warmed engine judges as a cold one does.
    expect(getPermissionEngine(registry)!.evaluate('ls -la | grep -v x > /dev/null').verdict).toBe('allow');
    await registry.dispose();
  });

  it('does not run once the registry is disposed', async () => {
    const registry = expose({});
    const seen = evaluated(getPermissionEngine(registry)!);
    await registry.dispose();
    // Five times the warm-up's delay.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(seen).toEqual([]);
  });
});

describe('PermissionEngine built directly', () => {
  it('throws InvalidConfigError naming a bad rule', async () => {
    const { loadShellParser } = await import('@conch/shell-syntax');
    const { permissionConfigSchema } = await import('./config.js');
    const parser = await loadShellParser();
    const config = permissionConfigSchema.parse({ rules: { ask: ['ok', 'a * b'] } });
    expect(() => new PermissionEngine({ parser, config, cwd: '/tmp' })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringMatching(/rules\.ask\.1/) }),
    );
  });
});
