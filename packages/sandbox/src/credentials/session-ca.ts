// A certificate authority that lives as long as one conch session: its key is made at start, kept in
// this process's memory and never written anywhere, its certificate given only to the sandbox (in
// the CA bundle), so only the sandbox trusts what it signs.
//
// node:crypto makes keys and signs but cannot build an X.509 certificate, and the certificate
// structure (names, validity, extensions, DER) is exacting enough that writing an encoder here would
// be the riskiest line of the feature. node-forge builds it: a long-kept library (the one webpack-dev-
// server's and many proxies' self-signed certificates come from), no dependencies, no install
// script. Only the structure comes from forge: the keys are node's (OpenSSL) and so is the signature
// — forge's own RSA, in JavaScript, takes ~50 ms a signature here, node's ~1 ms.
import { generateKeyPair, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { createSecureContext, type SecureContext } from 'node:tls';
import { promisify } from 'node:util';
import type forge from 'node-forge';
import { clearStaleStat } from '@conch/core';

const generate = promisify(generateKeyPair);
// node-forge loads with the first CA (SessionCa.create), not at import: ~380 KB of JavaScript that
// every host and conch-mcp start evaluated, credentials configured or not.
let asn1: typeof forge.asn1;
let pki: typeof forge.pki;
let md: typeof forge.md;
async function loadForge(): Promise<void> {
  if (pki) return;
  clearStaleStat(); // a lazy import of a linked package: see @conch/core's stale-stat.ts
  const lib = (await import('node-forge')).default;
  ({ asn1, pki, md } = lib);
}

export interface SessionCaOptions {
  /**
   * The only names it may sign for: the CA certificate carries them as a critical name constraint,
   * so even a leaked CA key could not vouch for another site. Leaves for other hosts are refused.
   * Default: no constraint (any host).
   */
  hosts?: readonly string[];
  /** How long the CA and its leaves are valid (default 30 days; they start an hour back, for clock skew). */
  validityDays?: number;
  /** The CA's common name (default `conch session CA <random>`). */
  commonName?: string;
}

/** A leaf certificate and its key, PEM (the key is the session's one leaf key). */
export interface IssuedLeaf {
  cert: string;
  key: string;
}

/** Positive, 16 random bytes, minimal DER (a first byte of 0x01–0x7f). */
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f || 0x01;
  return bytes.toString('hex');
}

/** A signer forge's `cert.sign` calls after it has built the TBSCertificate: node signs it. */
function nodeSigner(cert: forge.pki.Certificate, key: KeyObject): forge.pki.rsa.PrivateKey {
  return {
    sign: () => {
      const tbs = Buffer.from(asn1.toDer(cert.tbsCertificate).getBytes(), 'binary');
      return sign('sha256', tbs, key).toString('binary');
    },
  } as unknown as forge.pki.rsa.PrivateKey;
}

/** A GeneralName of a name constraint: dNSName [2] or iPAddress [7] (address and mask). */
function constraintName(host: string): forge.asn1.Asn1 {
  const family = isIP(host);
  if (family === 0) return asn1.create(asn1.Class.CONTEXT_SPECIFIC, 2, false, host);
  const bytes = family === 4 ? ipv4Bytes(host) : ipv6Bytes(host);
  const mask = Buffer.alloc(bytes.length, 0xff);
  return asn1.create(asn1.Class.CONTEXT_SPECIFIC, 7, false, Buffer.concat([bytes, mask]).toString('binary'));
}

function ipv4Bytes(ip: string): Buffer {
  return Buffer.from(ip.split('.').map(Number));
}

function ipv6Bytes(ip: string): Buffer {
  const [head = '', tail = ''] = ip.split('::') as [string, string?];
  const words = (part: string) => (part === '' ? [] : part.split(':'));
  const h = words(head);
  const t = ip.includes('::') ? words(tail) : [];
  const all = [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  all.forEach((word, i) => out.writeUInt16BE(parseInt(word, 16), i * 2));
  return out;
}

/**
 * NameConstraints (RFC 5280 §4.2.1.10) permitting exactly `hosts` (and their subdomains, as dNSName
 * constraints do). A kind of name with no host is given an impossible one (`invalid.`, `0.0.0.0/32`,
 * `::/128`), since a kind left out of the permitted list would be unconstrained.
 */
function nameConstraints(hosts: readonly string[]): forge.asn1.Asn1 {
  const names = new Set(hosts);
  if (![...names].some((h) => isIP(h) === 0)) names.add('invalid');
  if (![...names].some((h) => isIP(h) === 4)) names.add('0.0.0.0');
  if (![...names].some((h) => isIP(h) === 6)) names.add('::');
  const subtrees = [...names].map((host) =>
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [constraintName(host)]),
  );
  return asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    asn1.create(asn1.Class.CONTEXT_SPECIFIC, 0, true, subtrees),
  ]);
}

/**
 * A per-session certificate authority: a self-signed RSA CA made at `create()`, and a leaf for each
 * host asked for, made on first use and kept. The CA's private key is a KeyObject in this process
 * only (never exported, never on disk); the sandbox gets `certificate`, nothing else.
 *
 * Every leaf shares one key made with the CA (an RSA key costs ~100–300 ms to make; a certificate
 * ~1 ms), which is as private as the CA's: a leaf proves nothing without the CA's signature.
 */
export class SessionCa {
  /** The CA certificate, PEM: what the sandbox's CA bundle adds. */
  readonly certificate: string;
  readonly notAfter: Date;
  private readonly caKey: KeyObject;
  private readonly caCert: forge.pki.Certificate;
  private readonly leafKeyPem: string;
  private readonly leafPublic: forge.pki.PublicKey;
  private readonly permitted: ReadonlySet<string> | undefined;
  private readonly leaves = new Map<string, IssuedLeaf>();
  private readonly contexts = new Map<string, SecureContext>();

  private constructor(parts: {
    caKey: KeyObject;
    caCert: forge.pki.Certificate;
    leafKey: KeyObject;
    leafPublic: forge.pki.PublicKey;
    permitted: ReadonlySet<string> | undefined;
  }) {
    this.caKey = parts.caKey;
    this.caCert = parts.caCert;
    this.certificate = pki.certificateToPem(parts.caCert);
    this.notAfter = parts.caCert.validity.notAfter;
    this.leafKeyPem = parts.leafKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    this.leafPublic = parts.leafPublic;
    this.permitted = parts.permitted;
  }

  static async create(options: SessionCaOptions = {}): Promise<SessionCa> {
    const [ca, leaf] = await Promise.all([
      generate('rsa', { modulusLength: 2048 }),
      generate('rsa', { modulusLength: 2048 }),
      loadForge(),
    ]);
    const toForge = (key: KeyObject) =>
      pki.publicKeyFromPem(key.export({ type: 'spki', format: 'pem' }) as string);
    const now = Date.now();
    const cert = pki.createCertificate();
    cert.publicKey = toForge(ca.publicKey);
    cert.serialNumber = serialNumber();
    cert.validity.notBefore = new Date(now - 3600_000);
    cert.validity.notAfter = new Date(now + (options.validityDays ?? 30) * 86_400_000);
    const name = [
      {
        name: 'commonName',
        value: options.commonName ?? `conch session CA ${randomBytes(4).toString('hex')}`,
      },
      { name: 'organizationName', value: 'conch (this session only)' },
    ];
    cert.setSubject(name);
    cert.setIssuer(name);
    const extensions: object[] = [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ];
    const permitted = options.hosts ? new Set(options.hosts.map((h) => h.toLowerCase())) : undefined;
    if (permitted)
      extensions.push({ id: '2.5.29.30', critical: true, value: nameConstraints([...permitted]) });
    cert.setExtensions(extensions);
    cert.sign(nodeSigner(cert, ca.privateKey), md.sha256.create());
    return new SessionCa({
      caKey: ca.privateKey,
      caCert: cert,
      leafKey: leaf.privateKey,
      leafPublic: toForge(leaf.publicKey),
      permitted,
    });
  }

  /** The leaf for `host` (a name or IP literal, normalised), made on first use. */
  issue(host: string): IssuedLeaf {
    const known = this.leaves.get(host);
    if (known) return known;
    if (this.permitted && !this.permitted.has(host))
      throw new Error(`the session CA signs only for the configured hosts, not ${host}`);
    const cert = pki.createCertificate();
    cert.publicKey = this.leafPublic;
    cert.serialNumber = serialNumber();
    cert.validity.notBefore = new Date(Date.now() - 3600_000);
    cert.validity.notAfter = this.notAfter;
    const ip = isIP(host) !== 0;
    // The name is in the SAN; the CN repeats a DNS name for old tools. An IP goes in no CN: OpenSSL
    // would judge a CN that looks like a name against the DNS constraints, and refuse it.
    const commonName = !ip && host.length <= 64 ? host : 'conch session leaf';
    cert.setSubject([{ name: 'commonName', value: commonName }]);
    cert.setIssuer(this.caCert.subject.attributes);
    cert.setExtensions([
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [ip ? { type: 7, ip: host } : { type: 2, value: host }] },
      { name: 'subjectKeyIdentifier' },
      {
        name: 'authorityKeyIdentifier',
        keyIdentifier: this.caCert.generateSubjectKeyIdentifier().getBytes(),
      },
    ]);
    cert.sign(nodeSigner(cert, this.caKey), md.sha256.create());
    const leaf = { cert: pki.certificateToPem(cert), key: this.leafKeyPem };
    this.leaves.set(host, leaf);
    return leaf;
  }

  /** A TLS server context presenting `host`'s leaf (HTTP/1.1 only is offered by the caller's ALPN). */
  secureContext(host: string): SecureContext {
    let context = this.contexts.get(host);
    if (!context) {
      const leaf = this.issue(host);
      context = createSecureContext({ key: leaf.key, cert: leaf.cert });
      this.contexts.set(host, context);
    }
    return context;
  }
}
