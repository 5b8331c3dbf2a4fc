// eslint-disable-next-line no-restricted-imports -- reads the system's CA bundle (a path the host configures, outside any sandbox)
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { rootCertificates } from 'node:tls';
import { token, type Logger } from '@conch/core';
import { normalizeHost } from '../network-proxy.js';
import { CA_BUNDLE_IN_SANDBOX } from '../profile.js';
import {
  CA_ENV_NAMES,
  normalizeCredentials,
  type Credential,
  type CredentialConfig,
  type CredentialHost,
} from './credential-config.js';
import type { Substitution } from './header-rewrite.js';
import { SessionCa } from './session-ca.js';
import { TlsForwarder, type InterceptedTarget } from './tls-forwarder.js';

export { CA_BUNDLE_IN_SANDBOX };

/** The system CA bundles, first found wins (Debian/Ubuntu/Alpine/Arch, Fedora/RHEL, openSUSE, macOS/BSD). */
export const SYSTEM_CA_FILES: readonly string[] = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/ca-bundle.pem',
  '/etc/ssl/cert.pem',
];

export interface CredentialInjectorOptions {
  /**
   * CA certificates (PEM) upstream servers are verified against, instead of Node's defaults (a
   * test's stand-in server; a host behind a TLS-inspecting corporate proxy). Default: Node's trust
   * store, plus the host process's NODE_EXTRA_CA_CERTS.
   */
  upstreamCa?: string | readonly string[];
  /** The system bundle the sandbox's bundle starts from (default: the first of SYSTEM_CA_FILES; else Node's roots). */
  systemCaFile?: string;
  /** How long the session CA is valid (default 30 days). */
  validityDays?: number;
  logger?: Logger;
}

/** Where the proxy connects for an intercepted CONNECT. */
export interface InterceptUpstream {
  /** The address the proxy decided on (the forwarder connects there, it never looks the name up again). */
  address: string;
  /** Default: the CONNECT's port. */
  port?: number;
  /** Bytes the proxy read past the CONNECT request (the `head` of node's 'connect' event). */
  head?: Buffer;
}

/**
 * What the proxy calls, after answering `200 Connection Established`, instead of piping the client
 * to the destination: the tunnel is TLS-terminated and its requests carry the real credential.
 */
export type CredentialTunnel = (client: Duplex, upstream: InterceptUpstream) => void;

/**
 * Credentials that never enter the sandbox (issue 35 item 3). The host names, per credential, the
 * destinations it belongs to; the sandbox gets a placeholder in its environment and a CA bundle that
 * adds a per-session CA; the proxy asks `interceptFor(destination)` at each CONNECT and, for a
 * configured host and port only, hands the client socket to the returned tunnel, which terminates
 * TLS with a leaf of the session CA, replaces the placeholders configured for that destination in
 * the configured header (`Authorization` by default: `token`, `Bearer`, and `Basic` decoded and
 * encoded again) and sends each request on to the real server over verified TLS. Every other
 * destination is tunnelled untouched, so a placeholder sent anywhere else is only a placeholder.
 *
 * Off unless the host configures credentials. Its risks are in the package README ("Credentials
 * that never enter the sandbox").
 */
export class CredentialInjector {
  /** The session CA's certificate, PEM (public). */
  readonly caCertificate: string;
  private readonly credentials: readonly Credential[];
  private readonly ca: SessionCa;
  private readonly options: CredentialInjectorOptions;
  private readonly forwarder: TlsForwarder;
  private readonly byDestination = new Map<
    string,
    { substitutions: Map<string, Substitution[]>; all: Substitution[] }
  >();
  private bundle: string | undefined;

  private constructor(credentials: readonly Credential[], ca: SessionCa, options: CredentialInjectorOptions) {
    this.credentials = credentials;
    this.ca = ca;
    this.options = options;
    this.caCertificate = ca.certificate;
    const upstreamCa =
      options.upstreamCa === undefined
        ? undefined
        : typeof options.upstreamCa === 'string'
          ? [options.upstreamCa]
          : options.upstreamCa;
    this.forwarder = new TlsForwarder({ ca, upstreamCa, logger: options.logger });
    for (const credential of credentials) {
      const sub: Substitution = {
        placeholder: credential.placeholder,
        value: credential.value,
        scheme: credential.scheme,
      };
      for (const { host, port } of credential.hosts) {
        const key = `${host}:${port}`;
        let entry = this.byDestination.get(key);
        if (!entry) this.byDestination.set(key, (entry = { substitutions: new Map(), all: [] }));
        const list = entry.substitutions.get(credential.header) ?? [];
        list.push(sub);
        entry.substitutions.set(credential.header, list);
        if (!entry.all.includes(sub)) entry.all.push(sub);
      }
    }
  }

  /**
   * Checks `credentials` (throws InvalidCredentialConfigError naming the field) and makes the
   * session CA (~0.3–0.5 s: two RSA keys, made off the main thread).
   */
  static async create(
    credentials: readonly CredentialConfig[] | unknown,
    options: CredentialInjectorOptions = {},
  ): Promise<CredentialInjector> {
    const checked = normalizeCredentials(credentials);
    const hosts = [...new Set(checked.flatMap((c) => c.hosts.map((h) => h.host)))];
    const ca = await SessionCa.create({
      hosts,
      ...(options.validityDays !== undefined ? { validityDays: options.validityDays } : {}),
    });
    return new CredentialInjector(checked, ca, options);
  }

  /** The destinations some credential goes to (`host:port`), for a status line or the allow-list's check. */
  destinations(): CredentialHost[] {
    return [...this.byDestination.keys()].map((key) => {
      const at = key.lastIndexOf(':');
      return { host: key.slice(0, at), port: Number(key.slice(at + 1)) };
    });
  }

  /** The placeholders (what the sandbox's env filter must let through by value, and nothing else). */
  placeholders(): ReadonlySet<string> {
    return new Set(this.credentials.map((c) => c.placeholder));
  }

  /** Each credential's variables set to its placeholder: `{ GH_TOKEN: 'conch-placeholder-…' }`. */
  placeholderEnv(): Record<string, string> {
    const env: Record<string, string> = {};
    for (const credential of this.credentials)
      for (const name of credential.env) env[name] = credential.placeholder;
    return env;
  }

  /** The variables that make tools trust the bundle at `bundlePath` (its path inside the sandbox). */
  caEnv(bundlePath: string = CA_BUNDLE_IN_SANDBOX): Record<string, string> {
    return Object.fromEntries(CA_ENV_NAMES.map((name) => [name, bundlePath]));
  }

  /**
   * git's credential helpers for the credentials git can present (the Authorization header, Basic
   * or any scheme), as GIT_CONFIG_COUNT/KEY/VALUE variables: `credential.https://<host>.helper`
   * answers `get` with user `x-access-token` (what GitHub expects of a token; GitLab and Gitea
   * accept any user with a token) and the placeholder, which the proxy swaps on the wire. So `git
   * push https://github.com/…` works with no setup inside, while the user's own helpers stay out
   * (the closed home's gitconfig substitute has none). Empty when no credential fits.
   */
  gitEnv(): Record<string, string> {
    const entries: [string, string][] = [];
    for (const credential of this.credentials) {
      if (credential.header !== 'authorization' || (credential.scheme && credential.scheme !== 'Basic'))
        continue;
      for (const { host, port } of credential.hosts) {
        const name = host.includes(':') ? `[${host}]` : host;
        const url = port === 443 ? `https://${name}` : `https://${name}:${port}`;
        // The placeholder's characters ([A-Za-z0-9._~+/=-]) need no quoting in sh.
        entries.push([
          `credential.${url}.helper`,
          `!f() { test "$1" = get && printf 'username=x-access-token\\npassword=%s\\n' ${credential.placeholder}; }; f`,
        ]);
      }
    }
    if (!entries.length) return {};
    const env: Record<string, string> = { GIT_CONFIG_COUNT: String(entries.length) };
    entries.forEach(([key, value], i) => {
      env[`GIT_CONFIG_KEY_${i}`] = key;
      env[`GIT_CONFIG_VALUE_${i}`] = value;
    });
    return env;
  }

  /** What the sandbox's commands get: the placeholders, the CA variables and git's helpers. */
  sandboxEnv(bundlePath: string = CA_BUNDLE_IN_SANDBOX): Record<string, string> {
    return { ...this.placeholderEnv(), ...this.caEnv(bundlePath), ...this.gitEnv() };
  }

  /**
   * Whether `value` holds a credential's real value (a host variable the sandbox must not get,
   * whatever its name: `fromEnv: 'MY_GH'` is not a name the env filter knows).
   */
  hides(value: string): boolean {
    for (const credential of this.credentials) if (value.includes(credential.value)) return true;
    return false;
  }

  /** The CA bundle the sandbox trusts: the system's CAs (so other hosts verify as before) and the session CA. */
  caBundle(): string {
    if (this.bundle === undefined) {
      const file = this.options.systemCaFile ?? SYSTEM_CA_FILES.find((path) => existsSync(path));
      let system: string;
      try {
        system = file ? readFileSync(file, 'utf8') : rootCertificates.join('\n');
      } catch (error) {
        this.options.logger?.warn(
          { err: error, file },
          "credential proxy: the system CA bundle could not be read; the sandbox's bundle starts from Node's CAs",
        );
        system = rootCertificates.join('\n');
      }
      this.bundle = `${system.trimEnd()}\n\n# conch session CA: trusted by this session's sandbox only\n${this.ca.certificate.trimEnd()}\n`;
    }
    return this.bundle;
  }

  /**
   * Writes the bundle to `dir/ca-bundle.crt` (0644) and returns its path. `dir` is the host's
   * (outside every writable root: the proxy's own directory), bound read-only at
   * CA_BUNDLE_IN_SANDBOX. Holds no secret: certificates only.
   */
  writeCaBundle(dir: string): string {
    const path = join(dir, 'ca-bundle.crt');
    writeFileSync(path, this.caBundle(), { mode: 0o644 });
    return path;
  }

  /**
   * The proxy's hook, called for each CONNECT it allowed (`destination` as the proxy normalised it):
   * undefined — tunnel as usual — unless some credential is configured for exactly that host and
   * port; then the tunnel to hand the client socket to once `200` is answered.
   */
  interceptFor(destination: { host: string; port: number }): CredentialTunnel | undefined {
    const host = normalizeHost(destination.host);
    if (!host) return undefined;
    const entry = this.byDestination.get(`${host}:${destination.port}`);
    if (!entry) return undefined;
    return (client, upstream) => {
      const target: InterceptedTarget = {
        host,
        port: destination.port,
        address: upstream.address,
        upstreamPort: upstream.port ?? destination.port,
        substitutions: entry.substitutions,
        all: entry.all,
      };
      this.forwarder.accept(client, target, upstream.head);
    };
  }

  /** Ends every intercepted tunnel and upstream connection; the CA dies with the object. */
  close(): void {
    this.forwarder.close();
  }
}

/**
 * The registry's credential injector, provided by the permission plugin when its config names
 * credentials; the process manager reads it for each sandbox and each proxied connection.
 */
export const CREDENTIAL_INJECTOR = token<CredentialInjector>('conch.sandbox.CredentialInjector');
