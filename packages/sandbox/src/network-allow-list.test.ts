// Invariant: the allow-list's `*` and `*.domain` reach no address of this machine or its networks
// (its loopback in any address, private and link-local ranges, its own interface addresses, names
// that resolve onto them); an entry naming the address, `localhost`, or the host by an exact
// pattern does, and a deny-list entry wins over all of them.
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import { allowListDecider, compileHostPatterns, internalRefusal, ownAddress } from './network-allow-list.js';

const own = Object.values(networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;
const refusal = (host: string, port: number, addresses: string[], allow: string[]) =>
  internalRefusal(host, port, addresses, compileHostPatterns('allow', allow));

describe('internalRefusal', () => {
  it('`*` and `*.domain` do not reach this machine or its networks, as literals or through names', () => {
    for (const [host, addresses] of [
      ['127.0.0.1', []],
      ['127.0.0.2', []],
      ['::1', []],
      ['10.1.2.3', []],
      ['169.254.169.254', []],
      ['0.0.0.0', []],
      ['localhost', ['127.0.0.1']],
      ['rebind.example.com', ['192.168.1.5']],
      ...(own ? [[own, []] as [string, string[]], ['me.example.com', [own]] as [string, string[]]] : []),
    ] as [string, string[]][]) {
      expect(refusal(host, 80, addresses, ['*']), host).toMatch(/only an allow-list entry naming it/);
      expect(refusal(host, 80, addresses, ['*.example.com']), host).toMatch(
        /only an allow-list entry naming it/,
      );
    }
    expect(refusal('example.com', 443, ['93.184.216.34'], ['*'])).toBeUndefined();
  });

  it('an entry naming the address, localhost, or the host exactly reaches it (at its port)', () => {
    expect(refusal('127.0.0.2', 80, [], ['*', '127.0.0.2'])).toBeUndefined();
    expect(refusal('127.0.0.1', 5432, [], ['localhost:5432'])).toBeUndefined();
    expect(refusal('127.0.0.1', 5433, [], ['localhost:5432'])).toMatch(/naming it/);
    expect(refusal('localhost', 5432, ['127.0.0.1', '::1'], ['localhost:5432'])).toBeUndefined();
    expect(refusal('db.internal', 5432, ['10.0.0.7'], ['db.internal'])).toBeUndefined();
    expect(refusal('x.db.internal', 5432, ['10.0.0.7'], ['*.db.internal'])).toMatch(
      /resolves to an internal/,
    );
    if (own) expect(ownAddress(own)).toBe(true);
    expect(ownAddress('203.0.113.9')).toBe(false);
  });

  it("the library decider: '*' with a deny-list refuses the loopback in another address than the deny-list names", async () => {
    const decide = allowListDecider({ allow: ['*'], deny: ['127.0.0.1', 'localhost'] });
    for (const host of ['127.0.0.2', '127.0.0.53', ...(own ? [own] : [])])
      expect((await decide({ host, port: 8080, addresses: [] })).allowed, host).toBe(false);
    expect((await decide({ host: 'example.com', port: 443, addresses: ['93.184.216.34'] })).allowed).toBe(
      true,
    );
  });
});
