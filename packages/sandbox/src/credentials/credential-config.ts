import { randomBytes } from 'node:crypto';
import { toValidationIssues, type ValidationIssue } from '@conch/core';
import { z } from 'zod';
import { normalizeHost } from '../network-proxy.js';
import { InvalidCredentialConfigError } from './invalid-credential-config-error.js';

/** How a tool presents the credential in its header: `token <x>` (gh), `Bearer <x>`, `Basic base64(user:<x>)` (git). */
export const CREDENTIAL_SCHEMES = ['token', 'Bearer', 'Basic'] as const;
export type CredentialScheme = (typeof CREDENTIAL_SCHEMES)[number];

/** One credential as the host names it (the permission config's `credentials` entries). */
export interface CredentialConfig {
  /** Where the real value may go: exact names, `host:port` for a port other than 443. */
  hosts: readonly string[];
  /** The request header that carries it (default `Authorization`). */
  header?: string;
  /** Only a header of this scheme is rewritten (default: `token`, `Bearer`, `Basic` and a bare value). */
  scheme?: CredentialScheme;
  /** The real secret: kept by the host, put on the wire only to `hosts`. */
  value: string;
  /** What the sandbox sees instead (default: `conch-placeholder-<32 random hex digits>`). */
  placeholder?: string;
  /** Variables the sandbox gets, set to the placeholder (`GH_TOKEN`, `GITHUB_TOKEN`). */
  env?: readonly string[];
}

/** A destination a credential goes to: a normalised host (network-proxy.ts normalizeHost) and a port. */
export interface CredentialHost {
  host: string;
  port: number;
}

/** A credential checked and completed: what the injector works from. */
export interface Credential {
  hosts: readonly CredentialHost[];
  /** Lowercase. */
  header: string;
  scheme?: CredentialScheme;
  value: string;
  placeholder: string;
  env: readonly string[];
}

/** A placeholder: recognisable in a log or a bug report, random so it matches nothing by chance. */
export function newPlaceholder(): string {
  return `conch-placeholder-${randomBytes(16).toString('hex')}`;
}

/**
 * Variables the injector sets itself (the CA bundle's, git's GIT_CONFIG_* helpers) or that the
 * sandbox needs as they are: a credential cannot claim them.
 */
export const RESERVED_ENV = new Set([
  'PATH',
  'HOME',
  'USER',
  'SHELL',
  'TMPDIR',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'ALL_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'all_proxy',
  'no_proxy',
  'CONCH_PROC_COOKIE',
]);

/**
 * The variables that point tools at the CA bundle (OpenSSL and what uses it — curl, git, Python,
 * Ruby, Go —, Node, requests, pip, npm, yarn, the AWS CLI, cargo, deno, gRPC, bundler, hex).
 */
export const CA_ENV_NAMES: readonly string[] = [
  'SSL_CERT_FILE',
  'NODE_EXTRA_CA_CERTS',
  'REQUESTS_CA_BUNDLE',
  'CURL_CA_BUNDLE',
  'GIT_SSL_CAINFO',
  'PIP_CERT',
  'npm_config_cafile',
  'YARN_HTTPS_CA_FILE_PATH',
  'AWS_CA_BUNDLE',
  'CARGO_HTTP_CAINFO',
  'DENO_CERT',
  'GRPC_DEFAULT_SSL_ROOTS_FILE_PATH',
  'BUNDLE_SSL_CA_CERT',
  'HEX_CACERTS_PATH',
];

/** Headers a proxy manages itself: a credential never travels in one of them. */
const UNFIT_HEADERS = new Set([
  'host',
  'connection',
  'keep-alive',
  'content-length',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'expect',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
]);

/** Parses `host` or `host:port` into a normalised destination, or says what is wrong with it. */
export function parseCredentialHost(text: string): CredentialHost | string {
  const raw = text.trim();
  if (raw.includes('*'))
    return 'an exact host name (a credential is never sent to a pattern: name each host)';
  const m = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(raw);
  if (!m) return 'a host name or host:port';
  const host = normalizeHost(m[1]!);
  if (!host) return 'a host name or IP address';
  const port = m[2] === undefined ? 443 : Number(m[2]);
  if (port < 1 || port > 65535) return 'a port from 1 to 65535';
  return { host, port };
}

const hostSchema = z.string().superRefine((text, ctx) => {
  const parsed = parseCredentialHost(text);
  if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: `expected ${parsed}` });
});

const credentialSchema = z
  .object({
    hosts: z
      .array(hostSchema, { error: 'expected a list of hosts' })
      .min(1, { error: 'expected at least one host' })
      .max(64, { error: 'expected at most 64 hosts' }),
    header: z
      .string({ error: 'expected a header name' })
      .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { error: 'expected a header name (letters, digits, -)' })
      .refine((name) => !UNFIT_HEADERS.has(name.toLowerCase()), {
        error: 'expected a header a proxy forwards as it is (not Host, Connection, Content-Length, …)',
      })
      .optional(),
    scheme: z.enum(CREDENTIAL_SCHEMES, { error: "expected 'token', 'Bearer' or 'Basic'" }).optional(),
    value: z
      .string({ error: 'expected the secret as a string' })
      .min(1, { error: 'expected a non-empty secret' })
      .max(16_384, { error: 'expected a secret of at most 16384 characters' })
      // What may stand in a header value: no line breaks (they would split the request), no controls.
      .regex(/^[\t\x20-\x7e]+$/, {
        error: 'expected printable ASCII (no line breaks or control characters)',
      }),
    placeholder: z
      .string({ error: 'expected a string' })
      .min(16, { error: 'expected at least 16 characters (a short one could match by chance)' })
      .max(256, { error: 'expected at most 256 characters' })
      .regex(/^[A-Za-z0-9._~+/=-]+$/, { error: 'expected letters, digits and . _ ~ + / = -' })
      .optional(),
    env: z
      .array(
        z
          .string({ error: 'expected a variable name' })
          .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'expected a variable name' })
          .refine(
            (name) =>
              !RESERVED_ENV.has(name) && !CA_ENV_NAMES.includes(name) && !name.startsWith('GIT_CONFIG_'),
            {
              error: 'expected a variable the sandbox does not need for itself',
            },
          ),
        { error: 'expected a list of variable names' },
      )
      .max(32, { error: 'expected at most 32 variable names' })
      .optional(),
  })
  .strict();

const credentialsSchema = z.array(credentialSchema, { error: 'expected a list of credentials' }).max(64, {
  error: 'expected at most 64 credentials',
});

/** How an issue shows a secret it was given: its kind and length, never its text. */
function redacted(input: unknown, path: string): string | undefined {
  const m = /^(\d+)\.value$/.exec(path);
  if (!m || !Array.isArray(input)) return undefined;
  const value = (input[Number(m[1])] as { value?: unknown } | undefined)?.value;
  if (typeof value === 'string') return `a string of ${value.length} characters (not shown)`;
  return value === undefined
    ? 'nothing (undefined)'
    : `a ${value === null ? 'null' : typeof value} (not shown)`;
}

/**
 * Checks the host's credentials and completes them (placeholders drawn, hosts normalised, the
 * header lowercased). Throws InvalidCredentialConfigError naming each wrong field
 * (`credentials.0.hosts.1: expected …`); a secret's text is never in the message.
 */
export function normalizeCredentials(input: unknown): Credential[] {
  const parsed = credentialsSchema.safeParse(input);
  if (!parsed.success) {
    const issues = toValidationIssues(parsed.error, input, { schema: credentialsSchema }).map((issue) => ({
      ...issue,
      path: `credentials.${issue.path}`,
      received: redacted(input, issue.path) ?? issue.received,
    }));
    throw new InvalidCredentialConfigError(issues);
  }
  const issues: ValidationIssue[] = [];
  const credentials = parsed.data.map((config, index): Credential => {
    let placeholder = config.placeholder;
    // A drawn placeholder that happens to overlap the secret is drawn again (it never does in practice).
    while (placeholder === undefined || (!config.placeholder && overlaps(placeholder, config.value)))
      placeholder = newPlaceholder();
    if (overlaps(placeholder, config.value))
      issues.push({
        path: `credentials.${index}.placeholder`,
        expected: 'expected a placeholder that neither contains the secret nor is contained in it',
        received: 'one that does (not shown)',
      });
    return {
      hosts: config.hosts.map((text) => parseCredentialHost(text) as CredentialHost),
      header: (config.header ?? 'Authorization').toLowerCase(),
      ...(config.scheme ? { scheme: config.scheme } : {}),
      value: config.value,
      placeholder,
      env: [...new Set(config.env ?? [])],
    };
  });
  const envOwner = new Map<string, number>();
  credentials.forEach((credential, index) => {
    credentials.forEach((other, j) => {
      if (j === index) return;
      if (other.placeholder.includes(credential.placeholder))
        issues.push({
          path: `credentials.${index}.placeholder`,
          expected: `expected a placeholder no other credential's contains (credentials.${j} has it)`,
          received: JSON.stringify(credential.placeholder),
        });
      if (other.value.includes(credential.placeholder))
        issues.push({
          path: `credentials.${index}.placeholder`,
          expected: `expected a placeholder that is not part of another credential's secret (credentials.${j})`,
          received: 'one that is (not shown)',
        });
    });
    credential.env.forEach((name, k) => {
      const owner = envOwner.get(name);
      if (owner === undefined) envOwner.set(name, index);
      else
        issues.push({
          path: `credentials.${index}.env.${k}`,
          expected: `expected a variable no other credential sets (credentials.${owner} sets it)`,
          received: JSON.stringify(name),
        });
    });
  });
  if (issues.length) throw new InvalidCredentialConfigError(issues);
  return credentials;
}

function overlaps(placeholder: string, value: string): boolean {
  return placeholder.includes(value) || value.includes(placeholder);
}
