// Invariant: importing the permission plugin loads nothing; its first exposure in a process loads
// the bash parser (an asynchronous setup) and checks the config's rule examples with the same
// INVALID_CONFIG a loaded parser gives at validation; once loaded, exposure is synchronous.
// Each case runs in a fresh node process (the parser is loaded once per process; this package's
// vitest setup loads it for every other test), against the built package.
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PKG = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Runs an ES module body in a fresh node (cwd: this package), returning what it printed as JSON. */
function fresh(body: string): Promise<Record<string, unknown>> {
  const script = `
    import 'reflect-metadata';
    import { PluginRegistry } from '@conch/core';
    import { permissionPlugin, permissionReady, getPermissionEngine } from '@conch/permission';
    const out = {};
    const codeOf = (fn) => { try { fn(); return 'ok'; } catch (e) { return e.code ?? String(e); } };
    ${body}
    process.stdout.write(JSON.stringify(out));`;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', script],
      { cwd: PKG, timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as Record<string, unknown>);
      },
    );
  });
}

const BAD_EXAMPLE = {
  sandbox: 'off',
  rules: { allow: ['ls', { pattern: 'npm run test:*', examples: { match: ['npm test'], notMatch: [] } }] },
};
const BAD_NOT_MATCH = {
  sandbox: 'off',
  rules: { deny: [{ pattern: 'git push:*', examples: { match: [], notMatch: ['git push origin main'] } }] },
};

describe('the bash parser loads at first exposure', () => {
  it('import loads no parser: a first synchronous expose is refused as asynchronous, an awaited one works', async () => {
    const out = await fresh(`
      const before = new PluginRegistry({ plugins: [permissionPlugin] });
      out.syncFirst = codeOf(() => before.exposeSync('permission', { sandbox: 'off' }));
      const registry = new PluginRegistry({ plugins: [permissionPlugin] });
      const exposing = registry.expose('permission', { sandbox: 'off' });
      out.engineBeforeAwait = getPermissionEngine(registry) !== undefined;
      await exposing;
      out.decision = getPermissionEngine(registry).evaluate('rm -rf /').verdict;
      const again = new PluginRegistry({ plugins: [permissionPlugin] });
      out.syncAfter = codeOf(() => again.exposeSync('permission', { sandbox: 'off' }));
      out.readAfter = getPermissionEngine(again).evaluate('ls -la').verdict;
      await Promise.all([before.dispose(), registry.dispose(), again.dispose()]);`);
    expect(out).toEqual({
      syncFirst: 'INVALID_PLUGIN',
      engineBeforeAwait: false,
      decision: 'deny',
      syncAfter: 'ok',
      readAfter: 'allow',
    });
  });

  it('permissionReady() makes the first exposure synchronous', async () => {
    const out = await fresh(`
      await permissionReady();
      const registry = new PluginRegistry({ plugins: [permissionPlugin] });
      out.sync = codeOf(() => registry.exposeSync('permission', { sandbox: 'off' }));
      out.decision = getPermissionEngine(registry).evaluate('cat README.md').verdict;
      await registry.dispose();`);
    expect(out).toEqual({ sync: 'ok', decision: 'allow' });
  });

  it.each([
    ['a match example the rule misses', BAD_EXAMPLE, 'rules.allow.1.examples.match.0'],
    ['a notMatch example the rule matches', BAD_NOT_MATCH, 'rules.deny.0.examples.notMatch.0'],
  ])(
    '%s: the first (deferred) check and the loaded parser give the same INVALID_CONFIG',
    async (_name, config, path) => {
      const out = await fresh(`
        const config = ${JSON.stringify(config)};
        const issuesOf = async (registry) => {
          try { await registry.expose('permission', config); return 'exposed'; }
          catch (e) { return { code: e.code, plugin: e.pluginName, issues: e.issues }; }
        };
        out.first = await issuesOf(new PluginRegistry({ plugins: [permissionPlugin] }));
        out.loaded = await issuesOf(new PluginRegistry({ plugins: [permissionPlugin] }));
        out.loadedSync = (() => {
          try { new PluginRegistry({ plugins: [permissionPlugin] }).exposeSync('permission', config); return 'exposed'; }
          catch (e) { return e.code; }
        })();`);
      expect(out.first).toEqual(out.loaded);
      expect(out.loadedSync).toBe('INVALID_CONFIG');
      const first = out.first as { code: string; plugin: string; issues: { path: string }[] };
      expect(first.code).toBe('INVALID_CONFIG');
      expect(first.plugin).toBe('permission');
      expect(first.issues.map((i) => i.path)).toEqual([path]);
    },
  );
});
