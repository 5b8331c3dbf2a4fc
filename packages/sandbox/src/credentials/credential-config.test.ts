// The credentials config is checked field by field, a secret never shows in an error, and every
// placeholder is random, distinct, and neither holds nor is held by a secret.
import { describe, expect, it } from 'vitest';
import { normalizeCredentials } from './credential-config.js';
import { InvalidCredentialConfigError } from './invalid-credential-config-error.js';

const SECRET = 'ghp_TopSecretValue000111222333444555666';

function failure(input: unknown): InvalidCredentialConfigError {
  try {
    normalizeCredentials(input);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidCredentialConfigError);
    return error as InvalidCredentialConfigError;
  }
  throw new Error('expected the config to be refused');
}

describe('normalizeCredentials', () => {
  it('completes a credential: hosts normalised with port 443, header lowercased, a placeholder drawn', () => {
    const [c] = normalizeCredentials([
      {
        hosts: ['GitHub.com.', 'api.github.com', 'git.example.com:8443'],
        value: SECRET,
        env: ['GH_TOKEN', 'GITHUB_TOKEN'],
      },
    ]);
    expect(c!.hosts).toEqual([
      { host: 'github.com', port: 443 },
      { host: 'api.github.com', port: 443 },
      { host: 'git.example.com', port: 8443 },
    ]);
    expect(c!.header).toBe('authorization');
    expect(c!.placeholder).toMatch(/^conch-placeholder-[0-9a-f]{32}$/);
    expect(c!.placeholder).not.toContain(SECRET);
    expect(SECRET).not.toContain(c!.placeholder);
    expect(c!.env).toEqual(['GH_TOKEN', 'GITHUB_TOKEN']);
  });

  it('draws a different placeholder for every credential and every session', () => {
    const config = [
      { hosts: ['a.example'], value: 'secret-a-0000000000' },
      { hosts: ['b.example'], value: 'secret-b-0000000000' },
    ];
    const first = normalizeCredentials(config).map((c) => c.placeholder);
    const second = normalizeCredentials(config).map((c) => c.placeholder);
    expect(new Set([...first, ...second]).size).toBe(4);
  });

  it('keeps a placeholder the host chose, and its header and scheme', () => {
    const [c] = normalizeCredentials([
      {
        hosts: ['api.example'],
        header: 'X-Api-Key',
        scheme: 'Bearer',
        value: SECRET,
        placeholder: 'ghp_placeholder0000000000000000000000',
      },
    ]);
    expect(c).toMatchObject({
      header: 'x-api-key',
      scheme: 'Bearer',
      placeholder: 'ghp_placeholder0000000000000000000000',
    });
  });

  const refused: [string, unknown, string][] = [
    ['not a list', { hosts: ['a'], value: 'x' }, 'credentials.(root): expected a list of credentials'],
    ['no hosts', [{ hosts: [], value: SECRET }], 'credentials.0.hosts: expected at least one host'],
    [
      'a wildcard host',
      [{ hosts: ['*.github.com'], value: SECRET }],
      'credentials.0.hosts.0: expected an exact host name',
    ],
    [
      'a host with a path',
      [{ hosts: ['github.com', 'evil.com/github.com'], value: SECRET }],
      'credentials.0.hosts.1: expected a host name',
    ],
    [
      'a port out of range',
      [{ hosts: ['github.com:70000'], value: SECRET }],
      'credentials.0.hosts.0: expected a port from 1 to 65535',
    ],
    [
      'an unknown scheme',
      [{ hosts: ['a.example'], value: SECRET, scheme: 'Digest' }],
      "credentials.0.scheme: expected 'token', 'Bearer' or 'Basic'",
    ],
    [
      'a header the proxy manages',
      [{ hosts: ['a.example'], value: SECRET, header: 'Host' }],
      'credentials.0.header: expected a header a proxy forwards',
    ],
    [
      'a header name with a space',
      [{ hosts: ['a.example'], value: SECRET, header: 'X Key' }],
      'credentials.0.header: expected a header name',
    ],
    [
      'an empty secret',
      [{ hosts: ['a.example'], value: '' }],
      'credentials.0.value: expected a non-empty secret',
    ],
    [
      'a short placeholder',
      [{ hosts: ['a.example'], value: SECRET, placeholder: 'short' }],
      'credentials.0.placeholder: expected at least 16 characters',
    ],
    [
      'an env name the sandbox needs',
      [{ hosts: ['a.example'], value: SECRET, env: ['PATH'] }],
      'credentials.0.env.0: expected a variable the sandbox does not need',
    ],
    [
      'a CA variable',
      [{ hosts: ['a.example'], value: SECRET, env: ['SSL_CERT_FILE'] }],
      'credentials.0.env.0: expected a variable the sandbox does not need',
    ],
    [
      'an unknown key',
      [{ hosts: ['a.example'], value: SECRET, headers: 'x' }],
      "credentials.0.headers: no such key (unknown field headers); did you mean 'header'?",
    ],
    [
      'a placeholder inside the secret',
      [
        {
          hosts: ['a.example'],
          value: `${SECRET}-conch-placeholder-xyz`,
          placeholder: 'conch-placeholder-xyz',
        },
      ],
      'credentials.0.placeholder: expected a placeholder that neither contains the secret nor is contained in it',
    ],
    [
      'two credentials with one placeholder',
      [
        { hosts: ['a.example'], value: 'secret-a-0000000000', placeholder: 'same-placeholder-000' },
        { hosts: ['b.example'], value: 'secret-b-0000000000', placeholder: 'same-placeholder-000' },
      ],
      "credentials.0.placeholder: expected a placeholder no other credential's contains (credentials.1 has it)",
    ],
    [
      'two credentials setting one variable',
      [
        { hosts: ['a.example'], value: 'secret-a-0000000000', env: ['TOKEN'] },
        { hosts: ['b.example'], value: 'secret-b-0000000000', env: ['TOKEN'] },
      ],
      'credentials.1.env.0: expected a variable no other credential sets (credentials.0 sets it)',
    ],
  ];
  it.each(refused)('refuses %s, naming the field', (_name, input, message) => {
    const error = failure(input);
    expect(error.code).toBe('INVALID_CREDENTIAL_CONFIG');
    expect(error.message).toContain(message);
  });

  it('never shows the secret in an error', () => {
    const multiline = `${SECRET}\ninjected: header`;
    const error = failure([{ hosts: ['a.example'], value: multiline }]);
    expect(error.message).toContain('credentials.0.value: expected printable ASCII');
    expect(error.message).toContain('a string of');
    expect(error.message).not.toContain(SECRET);
    expect(JSON.stringify(error.toJSON())).not.toContain(SECRET);
    const overlap = failure([{ hosts: ['a.example'], value: `${SECRET}zz`, placeholder: SECRET }]);
    expect(overlap.message).not.toContain(SECRET);
  });
});
