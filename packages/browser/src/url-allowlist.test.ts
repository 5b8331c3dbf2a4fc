// Invariant: the browser allowlist lets through exactly the URLs its patterns name (scheme, host, port, path prefix on segment boundaries), and a pattern that is not one is rejected with what is wrong.
import { describe, expect, it } from 'vitest';
import { compileUrlPattern, DEFAULT_ALLOWED_URLS, UrlAllowlist } from './url-allowlist.js';

const CASES: [pattern: string, url: string, allowed: boolean][] = [
  ['http://localhost:*', 'http://localhost:3000/', true],
  ['http://localhost:*', 'http://localhost/', true],
  ['http://localhost:*', 'https://localhost:3000/', false],
  ['http://localhost:*', 'http://localhost.evil.com:3000/', false],
  ['http://127.0.0.1:*', 'http://127.0.0.1:8000/index.html', true],
  ['http://[::1]:*', 'http://[::1]:8000/', true],
  ['https://example.com', 'https://example.com/a/b', true],
  ['https://example.com', 'https://example.com:443/', true],
  ['https://example.com', 'https://example.com:8443/', false],
  ['https://example.com', 'http://example.com/', false],
  ['https://example.com', 'https://sub.example.com/', false],
  ['https://*.example.com', 'https://sub.example.com/', true],
  ['https://*.example.com', 'https://a.b.example.com/', true],
  ['https://*.example.com', 'https://example.com/', false],
  ['https://*.example.com', 'https://notexample.com/', false],
  ['*://example.com', 'http://example.com/', true],
  ['*://example.com', 'https://example.com/', true],
  ['*://example.com', 'file:///example.com', false],
  ['https://example.com/docs', 'https://example.com/docs', true],
  ['https://example.com/docs', 'https://example.com/docs/intro', true],
  ['https://example.com/docs', 'https://example.com/docsx', false],
  ['https://example.com/docs/', 'https://example.com/docs/a', true],
  ['https://*:*', 'https://anything.test:9999/', true],
  ['file:///srv/site', 'file:///srv/site/index.html', true],
  ['file:///srv/site', 'file:///etc/passwd', false],
  ['about:blank', 'about:blank', true],
  ['about:blank', 'about:srcdoc', false],
];

describe('URL allowlist', () => {
  it.each(CASES)('%s vs %s -> %s', (pattern, url, allowed) => {
    const list = new UrlAllowlist([pattern]);
    expect(list.match(new URL(url)) !== undefined).toBe(allowed);
  });

  it('allows loopback dev servers and about:blank by default, nothing else', () => {
    const list = new UrlAllowlist(DEFAULT_ALLOWED_URLS);
    expect(list.match(new URL('http://127.0.0.1:41234/'))).toBeDefined();
    expect(list.match(new URL('http://localhost:5173/app'))).toBeDefined();
    expect(list.match(new URL('about:blank'))).toBeDefined();
    expect(list.match(new URL('https://example.com/'))).toBeUndefined();
    expect(list.match(new URL('http://192.168.1.1/'))).toBeUndefined();
    expect(list.match(new URL('data:text/html,hi'))).toBeUndefined();
  });

  it.each(['example.com', 'https://', 'https://exa*mple.com', 'https://*foo.com', 'ftp//x'])(
    'rejects %s with what is wrong',
    (pattern) => {
      expect(() => compileUrlPattern(pattern)).toThrow(
        expect.objectContaining({ code: 'INVALID_URL_PATTERN', message: expect.stringContaining(pattern) }),
      );
    },
  );

  it('suggests the origin a host would add', () => {
    expect(UrlAllowlist.suggestionFor(new URL('https://example.com:8443/a?b'))).toBe(
      'https://example.com:8443',
    );
  });
});
