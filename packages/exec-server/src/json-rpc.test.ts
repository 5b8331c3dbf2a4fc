// JSON-RPC over a byte stream: requests meet their answers whatever the chunking, errors keep their stable code, lines that are not JSON-RPC are noise, and a closed stream fails what is pending with the error the owner chose.
import { PassThrough } from 'node:stream';
import { ConchError } from '@conch/core';
import { describe, expect, test } from 'vitest';
import { RpcError, RpcPeer } from './json-rpc.js';

function pair(onNoise?: (line: string) => void) {
  const aToB = new PassThrough();
  const bToA = new PassThrough();
  const a = new RpcPeer({ input: bToA, output: aToB, closeError: (reason) => new Error(`lost: ${reason}`) });
  const b = new RpcPeer({ input: aToB, output: bToA, ...(onNoise ? { onNoise } : {}) });
  return { a, b, aToB, bToA };
}

describe('RpcPeer', () => {
  test('requests are answered in any order, notifications delivered, errors keep their code', async () => {
    const { a, b } = pair();
    b.handle('echo', (p: { text: string }) => ({ text: p.text }));
    b.handle('slow', () => new Promise((resolve) => setTimeout(() => resolve({ done: true }), 30)));
    b.handle('fail', () => {
      throw new ConchError({ code: 'FILE_NOT_FOUND', message: 'nothing at /x' });
    });
    const seen: unknown[] = [];
    a.onNotification('note', (p: unknown) => seen.push(p));
    const slow = a.request('slow', {});
    const fast = a.request('echo', { text: 'é🙂' });
    expect(await fast).toEqual({ text: 'é🙂' });
    expect(await slow).toEqual({ done: true });
    const error = await a.request('fail', {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RpcError);
    expect(error).toMatchObject({ message: 'nothing at /x', data: { code: 'FILE_NOT_FOUND' } });
    const unknown = await a.request('nope', {}).catch((e: unknown) => e);
    expect(unknown).toMatchObject({ rpcCode: -32601, data: { code: 'UNKNOWN_METHOD' } });
    b.notify('note', { n: 1 });
    await new Promise((r) => setTimeout(r, 10));
    expect(seen).toEqual([{ n: 1 }]);
  });

  test('a message split across chunks (a multi-byte character too) is read whole; noise lines are reported, not fatal', async () => {
    const noise: string[] = [];
    const aToB = new PassThrough();
    const bToA = new PassThrough();
    const b = new RpcPeer({ input: aToB, output: bToA, onNoise: (l) => noise.push(l) });
    b.handle('echo', (p: unknown) => p);
    const replies: string[] = [];
    bToA.on('data', (d: Buffer) => replies.push(d.toString()));
    const bytes = Buffer.from(
      `Last login: yesterday\n${JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'echo', params: { s: 'ü' } })}\n`,
    );
    const cut = bytes.indexOf(Buffer.from('ü')) + 1; // inside the two bytes of ü
    aToB.write(bytes.subarray(0, cut));
    aToB.write(bytes.subarray(cut));
    await new Promise((r) => setTimeout(r, 10));
    expect(noise).toEqual(['Last login: yesterday']);
    expect(JSON.parse(replies.join(''))).toEqual({ jsonrpc: '2.0', id: 7, result: { s: 'ü' } });
  });

  test('the stream ending fails every pending request with the owner’s error, and later ones at once', async () => {
    const { a, b, bToA } = pair();
    b.handle('never-answered', () => new Promise(() => {}));
    const pending = a.request('never-answered', {});
    await new Promise((r) => setTimeout(r, 10));
    bToA.end();
    await expect(pending).rejects.toThrow('lost: the stream ended');
    await expect(a.request('after', {})).rejects.toThrow('lost: the stream ended');
    expect(a.closed).toBe(true);
  });
});
