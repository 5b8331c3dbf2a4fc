// Invariant: a plugin's declared `needs` arrive as `ctx.deps` from the registry's container; exposure order follows `provides`, and a missing or circular need fails naming the plugins and the token.
import { pino } from 'pino';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { createRegistryFromConfig } from './config-file.js';
import { definePlugin, defineTool } from './define.js';
import { ConchError } from './errors/conch-error.js';
import { PluginRegistry } from './registry.js';
import { token } from './token.js';

const logger = () => pino({ level: 'silent' });

interface Clock {
  now(): number;
}
interface Greeter {
  greet(name: string): string;
}
const CLOCK = token<Clock>('test.deps.Clock');
const GREETER = token<Greeter>('test.deps.Greeter');
const NOBODY = token<string>('test.deps.Nobody');

const clockPlugin = definePlugin({
  name: 'clock',
  version: '1.0.0',
  provides: [CLOCK],
  setup(ctx) {
    ctx.provide(CLOCK, { now: () => 42 });
    return { tools: [] };
  },
});

const greeterPlugin = definePlugin({
  name: 'greeter',
  version: '1.0.0',
  provides: [GREETER],
  setup(ctx) {
    ctx.provide(GREETER, { greet: (name) => `hello ${name}` });
    return { tools: [] };
  },
});

/** Needs the clock (required) and the greeter (optional, read at call time). */
const reporterPlugin = definePlugin({
  name: 'reporter',
  version: '1.0.0',
  needs: { clock: CLOCK, greeter: { token: GREETER, optional: true } },
  setup(ctx) {
    expectTypeOf(ctx.deps.clock).toEqualTypeOf<Clock>();
    expectTypeOf(ctx.deps.greeter).toEqualTypeOf<Greeter | undefined>();
    const atSetup = ctx.deps.clock.now();
    return {
      tools: [
        defineTool({
          name: 'report',
          description: 'Report',
          inputSchema: z.strictObject({}),
          execute: () => ({
            atSetup,
            greeting: ctx.deps.greeter?.greet('you') ?? null,
          }),
        }),
      ],
    };
  },
});

describe('declared dependencies', () => {
  it('injects required deps, exposing the known provider first; an absent optional one is undefined', async () => {
    const registry = new PluginRegistry({
      logger: logger(),
      plugins: [clockPlugin, greeterPlugin, reporterPlugin],
    });
    const exposed: string[] = [];
    registry.events.on('plugin.exposed', (e) => exposed.push(e.plugin));
    await expect(registry.exposeTool('reporter')).resolves.toEqual(['report']);
    expect(exposed).toEqual(['clock', 'reporter']);
    expect(registry.isExposed('greeter')).toBe(false);
    expect(await registry.execute('report', {})).toMatchObject({ atSetup: 42, greeting: null });
    // Optional needs bind late: a partner exposed afterwards is seen at the next call.
    await registry.exposeTool('greeter');
    expect(await registry.execute('report', {})).toMatchObject({ greeting: 'hello you' });
    await registry.dispose();
  });

  it('awaits an asynchronous provider before the plugin that needs it', async () => {
    const slowClock = definePlugin({
      name: 'slow-clock',
      version: '1.0.0',
      provides: [CLOCK],
      async setup(ctx) {
        await new Promise((r) => setTimeout(r, 10));
        ctx.provide(CLOCK, { now: () => 7 });
        return { tools: [] };
      },
    });
    const registry = new PluginRegistry({ logger: logger(), plugins: [slowClock, reporterPlugin] });
    await registry.expose('reporter');
    expect(await registry.execute('report', {})).toMatchObject({ atSetup: 7 });
    await registry.dispose();
  });

  it('refuses a required need nobody provides, naming the plugin, the token and the candidates', async () => {
    const needy = definePlugin({
      name: 'needy',
      version: '1.0.0',
      needs: { value: NOBODY },
      setup: () => ({ tools: [] }),
    });
    const registry = new PluginRegistry({ logger: logger(), plugins: [needy] });
    const error = await registry.expose('needy').catch((e: unknown) => e);
    expect(ConchError.isInstance(error) && error.code).toBe('MISSING_DEPENDENCY');
    expect((error as Error).message).toContain("Plugin 'needy' needs the service 'test.deps.Nobody'");
    expect((error as Error).message).toContain('No known plugin declares it');
    expect(registry.isExposed('needy')).toBe(false);

    // A provider that is known but deferred by the caller is named as a candidate.
    const withClock = new PluginRegistry({ logger: logger(), plugins: [clockPlugin, reporterPlugin] });
    const deferred = await withClock
      .expose('reporter', {}, { deferPartners: ['clock'] })
      .catch((e: unknown) => e);
    expect(ConchError.isInstance(deferred) && deferred.code).toBe('MISSING_DEPENDENCY');
    expect((deferred as Error).message).toMatch(/'reporter' needs the service 'test\.deps\.Clock'.*'clock'/);
    await Promise.all([registry.dispose(), withClock.dispose()]);
  });

  it('names both plugins of a cycle of required needs', async () => {
    const ping = definePlugin({
      name: 'ping',
      version: '1.0.0',
      provides: [CLOCK],
      needs: { greeter: GREETER },
      setup: () => ({ tools: [] }),
    });
    const pong = definePlugin({
      name: 'pong',
      version: '1.0.0',
      provides: [GREETER],
      needs: { clock: CLOCK },
      setup: () => ({ tools: [] }),
    });
    const registry = new PluginRegistry({ logger: logger(), plugins: [ping, pong] });
    const error = await registry.expose('ping').catch((e: unknown) => e);
    expect(ConchError.isInstance(error) && error.code).toBe('CIRCULAR_DEPENDENCY');
    expect((error as Error).message).toContain("'ping' and 'pong'");
    expect((error as Error).message).toContain(
      "'ping' needs 'test.deps.Greeter' from 'pong' needs 'test.deps.Clock' from 'ping'",
    );
    expect(registry.isExposed('ping') || registry.isExposed('pong')).toBe(false);
    expect(() => registry.dependencyOrder(['pong', 'ping'])).toThrow(/'pong' and 'ping'/);
    await registry.dispose();
  });

  it('orders a config file by needs and provides, keeping the file order otherwise', async () => {
    const order = new PluginRegistry({
      logger: logger(),
      plugins: [clockPlugin, greeterPlugin, reporterPlugin],
    });
    expect(order.dependencyOrder(['reporter', 'greeter', 'clock'])).toEqual(['greeter', 'clock', 'reporter']);
    expect(order.dependencyOrder(['greeter', 'unknown', 'clock'])).toEqual(['greeter', 'unknown', 'clock']);
    await order.dispose();

    const registry = await createRegistryFromConfig(
      { plugins: { reporter: {}, clock: {} } },
      { logger: logger(), plugins: [clockPlugin, greeterPlugin, reporterPlugin], searchPaths: [] },
    );
    expect(
      registry
        .plugins()
        .filter((p) => p.exposed)
        .map((p) => p.name),
    ).toEqual(['clock', 'reporter']);
    expect(await registry.execute('report', {})).toMatchObject({ atSetup: 42 });
    await registry.dispose();
  });

  it('refuses a malformed declaration with INVALID_PLUGIN', () => {
    const registry = new PluginRegistry({ logger: logger() });
    expect(() =>
      registry.register({
        name: 'bad',
        version: '1',
        needs: { x: 'not-a-token' },
        setup: () => ({}),
      } as never),
    ).toThrow(/needs/);
  });
});
