// The session CA signs leaves that OpenSSL and node verify for exactly their host, only for the
// hosts it was made for (a name constraint too), and its private key is never in anything it hands out.
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SessionCa } from './session-ca.js';

describe('SessionCa', () => {
  it('issues leaves that verify for their host (DNS and IP) under a CA constrained to the configured hosts', async () => {
    const ca = await SessionCa.create({ hosts: ['github.com', 'api.github.com', '127.0.0.1'] });
    const dir = mkdtempSync(join(tmpdir(), 'conch-ca-'));
    try {
      writeFileSync(join(dir, 'ca.pem'), ca.certificate);
      for (const host of ['api.github.com', 'github.com', '127.0.0.1']) {
        const leaf = ca.issue(host);
        writeFileSync(join(dir, 'leaf.pem'), leaf.cert);
        // OpenSSL, as curl and git (with OpenSSL) judge it: the chain, the name constraint, the name.
        const check = host === '127.0.0.1' ? ['-verify_ip', host] : ['-verify_hostname', host];
        const out = execFileSync(
          'openssl',
          ['verify', '-CAfile', join(dir, 'ca.pem'), ...check, join(dir, 'leaf.pem')],
          {
            encoding: 'utf8',
          },
        );
        expect(out).toContain(': OK');
        const x509 = new X509Certificate(leaf.cert);
        expect(x509.verify(new X509Certificate(ca.certificate).publicKey)).toBe(true);
        expect(host === '127.0.0.1' ? x509.checkIP(host) : x509.checkHost(host)).toBe(host);
        expect(x509.checkHost('evil.example')).toBeUndefined();
        expect(x509.ca).toBe(false);
      }
      const text = execFileSync('openssl', ['x509', '-in', join(dir, 'ca.pem'), '-noout', '-text'], {
        encoding: 'utf8',
      });
      expect(text).toMatch(/Name Constraints: critical[\s\S]*DNS:github\.com[\s\S]*DNS:api\.github\.com/);
      expect(text).toMatch(/CA:TRUE, pathlen:0/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a leaf for a host it was not made for', async () => {
    const ca = await SessionCa.create({ hosts: ['github.com'] });
    expect(() => ca.issue('evil.example')).toThrow(/not evil\.example/);
  });

  it('caches leaves and keeps its own key out of everything it hands out', async () => {
    const ca = await SessionCa.create();
    const leaf = ca.issue('a.example');
    expect(ca.issue('a.example')).toBe(leaf);
    expect(ca.secureContext('a.example')).toBe(ca.secureContext('a.example'));
    expect(ca.certificate).not.toContain('PRIVATE KEY');
    expect(leaf.cert).not.toContain('PRIVATE KEY');
    // The one private key it hands out is the leaves' (what a TLS server must hold), not the CA's:
    // it does not match the CA certificate's public key.
    const caKey = new X509Certificate(ca.certificate).publicKey.export({ type: 'spki', format: 'der' });
    const leafKey = new X509Certificate(leaf.cert).publicKey.export({ type: 'spki', format: 'der' });
    expect(Buffer.compare(caKey, leafKey)).not.toBe(0);
  });
});
