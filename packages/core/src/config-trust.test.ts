// A conch.config.json in a workspace conch has run in is loaded only as conch last loaded it: new, changed or removed ones throw CONFIG_UNTRUSTED until accepted; one outside every workspace is never pinned.
import { execFileSync } from 'node:child_process';
import { mkdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@conch/test-support';
import { pino } from 'pino';
import { expect, test } from 'vitest';
import { checkConfigFile, pinConfigFile } from './config-trust.js';
import { parseConchConfig } from './config-file.js';
import { ConchError } from './errors/conch-error.js';
import { type UntrustedConfigError } from './errors/untrusted-config-error.js';
import { PluginRegistry } from './registry.js';
import { TrustStore, UNTRUSTED_REASONS } from './trust-store.js';

const temp = (prefix: string) => realpathSync(tempDir(prefix));
const silent = pino({ level: 'silent' });

function setup() {
  const root = temp('conch-cfg-trust-');
  const ws = join(root, 'ws');
  mkdirSync(ws);
  const storeFile = join(root, 'state', 'trust.json');
  return { ws, storeFile, store: new TrustStore({ file: storeFile }), config: join(ws, 'conch.config.json') };
}

/** What a host like conch-mcp does at start: check, build the registry (discover), pin. */
async function start(file: string, cwd: string, storeFile: string, accept = false) {
  const store = new TrustStore({ file: storeFile });
  const checked = await checkConfigFile(file, { store, accept });
  const registry = new PluginRegistry({ cwd, trustStore: storeFile, logger: silent });
  try {
    await registry.discover();
  } finally {
    await pinConfigFile(checked, { store, accept });
    await registry.dispose();
  }
  return checked;
}

async function refusal(promise: Promise<unknown>): Promise<UntrustedConfigError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!ConchError.isInstance(error)) throw new Error(`expected a ConchError, got ${String(error)}`);
  return error as UntrustedConfigError;
}

test('first use passes and pins; the same bytes pass again; changed bytes are refused, naming the file', async () => {
  const { ws, storeFile, config } = setup();
  writeFileSync(config, JSON.stringify({ plugins: { cli: {} } }));
  const first = await start(config, ws, storeFile);
  expect(first.digest).toMatch(/^sha256:/);
  expect(parseConchConfig(first.bytes!.toString('utf8'), config).plugins).toEqual({ cli: {} });
  await start(config, ws, storeFile);

  writeFileSync(config, JSON.stringify({ plugins: { permission: { sandbox: 'off' }, cli: {} } }));
  const error = await refusal(start(config, ws, storeFile));
  expect(error.code).toBe('CONFIG_UNTRUSTED');
  expect(error.file).toBe(config);
  expect(error.workspace).toBe(ws);
  expect(error.reason).toBe(UNTRUSTED_REASONS.changed);
  expect(error.message).toContain(
    `The config file ${config} is changed since conch last ran in this workspace`,
  );
  expect(error.message).toContain('a sandboxed command may have written it');
  expect(error.message).toContain('--trust');
  // Refusing pinned nothing: still refused.
  expect((await refusal(start(config, ws, storeFile))).code).toBe('CONFIG_UNTRUSTED');

  // Accepted: loads and is re-pinned.
  const accepted = await start(config, ws, storeFile, true);
  expect(accepted.accepted).toEqual({ kind: 'config', path: config, reason: UNTRUSTED_REASONS.changed });
  await start(config, ws, storeFile);
});

test('no config at first: "none" is pinned, and a config that appears later is new', async () => {
  const { ws, storeFile, config } = setup();
  expect((await start(config, ws, storeFile)).digest).toBe('none');
  await start(config, ws, storeFile);
  writeFileSync(config, JSON.stringify({ plugins: { permission: { sandbox: 'off' } } }));
  expect((await refusal(start(config, ws, storeFile))).reason).toBe(UNTRUSTED_REASONS.new);
});

test('a config removed since conch last loaded it is refused too (the default may allow more)', async () => {
  const { ws, storeFile, config } = setup();
  writeFileSync(config, JSON.stringify({ plugins: { permission: { sandbox: 'read-only' } } }));
  await start(config, ws, storeFile);
  rmSync(config);
  expect((await refusal(start(config, ws, storeFile))).reason).toBe(UNTRUSTED_REASONS.removed);
});

test('a config outside every workspace is never pinned: edits to it pass', async () => {
  const { ws, storeFile } = setup();
  const elsewhere = join(temp('conch-cfg-home-'), 'conch.json');
  writeFileSync(elsewhere, JSON.stringify({ cwd: ws, plugins: {} }));
  await start(elsewhere, ws, storeFile);
  writeFileSync(elsewhere, JSON.stringify({ cwd: ws, plugins: { cli: {} } }));
  expect((await start(elsewhere, ws, storeFile)).accepted).toBeUndefined();
  expect(Object.keys((await new TrustStore({ file: storeFile }).read()).pins)).not.toContain(elsewhere);
});

test('another config file in the workspace, never loaded before, is new (a sandboxed command could have made it)', async () => {
  const { ws, storeFile, config } = setup();
  await start(config, ws, storeFile);
  const other = join(ws, 'other.json');
  writeFileSync(other, '{}');
  expect((await refusal(start(other, ws, storeFile))).reason).toBe(UNTRUSTED_REASONS.new);
});

test('a link in the workspace is judged at its own place: pointing it at another file is a change', async () => {
  const { ws, storeFile, config } = setup();
  const outside = temp('conch-cfg-target-');
  writeFileSync(join(outside, 'a.json'), '{}');
  writeFileSync(join(outside, 'b.json'), JSON.stringify({ plugins: { permission: { sandbox: 'off' } } }));
  symlinkSync(join(outside, 'a.json'), config);
  await start(config, ws, storeFile);
  rmSync(config);
  symlinkSync(join(outside, 'b.json'), config);
  const error = await refusal(start(config, ws, storeFile));
  expect([error.file, error.reason]).toEqual([config, UNTRUSTED_REASONS.changed]);
});

test('a FIFO at conch.config.json is refused without being opened (the start does not hang)', async () => {
  const { ws, storeFile, config } = setup();
  await start(config, ws, storeFile);
  execFileSync('mkfifo', [config]);
  const error = await refusal(start(config, ws, storeFile));
  expect(error.reason).toBe(UNTRUSTED_REASONS.new);
});
