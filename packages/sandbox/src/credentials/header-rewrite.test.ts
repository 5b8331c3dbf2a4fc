// A placeholder becomes its secret only in the shapes a credential travels in (token, Bearer, Basic
// decoded and encoded again, a bare value), only under its scheme when one is configured; anything
// else is left byte for byte.
import { describe, expect, it } from 'vitest';
import { scrubHeaderValue, substituteHeaderValue, type Substitution } from './header-rewrite.js';

const P = 'conch-placeholder-0123456789abcdef0123456789abcdef';
const S = 'ghp_RealSecretValue0123456789abcdefXYZ';
const any: Substitution[] = [{ placeholder: P, value: S }];
const b64 = (text: string) => Buffer.from(text, 'latin1').toString('base64');

describe('substituteHeaderValue', () => {
  const cases: [string, string, Substitution[], string][] = [
    ['gh: token', `token ${P}`, any, `token ${S}`],
    ['Bearer', `Bearer ${P}`, any, `Bearer ${S}`],
    ['scheme in capitals', `TOKEN ${P}`, any, `TOKEN ${S}`],
    ['scheme in lowercase', `bearer ${P}`, any, `bearer ${S}`],
    ['a bare value (X-Api-Key)', P, any, S],
    [
      'git: Basic x-access-token:<p>',
      `Basic ${b64(`x-access-token:${P}`)}`,
      any,
      `Basic ${b64(`x-access-token:${S}`)}`,
    ],
    ['Basic with another user', `Basic ${b64(`octocat:${P}`)}`, any, `Basic ${b64(`octocat:${S}`)}`],
    [
      'Basic with the token as user',
      `Basic ${b64(`${P}:x-oauth-basic`)}`,
      any,
      `Basic ${b64(`${S}:x-oauth-basic`)}`,
    ],
    ['Basic with the token as user, no password', `basic ${b64(`${P}:`)}`, any, `basic ${b64(`${S}:`)}`],
    [
      'Basic with a latin-1 user kept byte for byte',
      `Basic ${b64(`j\xf6rg:${P}`)}`,
      any,
      `Basic ${b64(`j\xf6rg:${S}`)}`,
    ],
    [
      'Basic without the placeholder: untouched',
      `Basic ${b64('user:pass')}`,
      any,
      `Basic ${b64('user:pass')}`,
    ],
    ['Basic not base64 but the placeholder bare', `Basic ${P}`, any, `Basic ${S}`],
    ['nothing to replace', 'token abc', any, 'token abc'],
    ['twice', `token ${P}${P}`, any, `token ${S}${S}`],
    [
      'scheme Bearer: Bearer replaced',
      `Bearer ${P}`,
      [{ placeholder: P, value: S, scheme: 'Bearer' }],
      `Bearer ${S}`,
    ],
    [
      'scheme Bearer: token left',
      `token ${P}`,
      [{ placeholder: P, value: S, scheme: 'Bearer' }],
      `token ${P}`,
    ],
    ['scheme Bearer: bare left', P, [{ placeholder: P, value: S, scheme: 'Bearer' }], P],
    [
      'scheme Bearer: Basic left',
      `Basic ${b64(`u:${P}`)}`,
      [{ placeholder: P, value: S, scheme: 'Bearer' }],
      `Basic ${b64(`u:${P}`)}`,
    ],
    [
      'scheme Basic: Basic replaced',
      `Basic ${b64(`u:${P}`)}`,
      [{ placeholder: P, value: S, scheme: 'Basic' }],
      `Basic ${b64(`u:${S}`)}`,
    ],
    ['scheme Basic: token left', `token ${P}`, [{ placeholder: P, value: S, scheme: 'Basic' }], `token ${P}`],
    [
      'scheme token: token replaced',
      `Token ${P}`,
      [{ placeholder: P, value: S, scheme: 'token' }],
      `Token ${S}`,
    ],
    [
      'another placeholder: untouched',
      `token ${P.replace('0123', '9999')}`,
      any,
      `token ${P.replace('0123', '9999')}`,
    ],
  ];
  it.each(cases)('%s', (_name, input, subs, expected) => {
    expect(substituteHeaderValue(input, subs)).toBe(expected);
  });

  it('replaces each placeholder with its own secret only', () => {
    const Q = 'conch-placeholder-ffffffffffffffffffffffffffffffff';
    const subs: Substitution[] = [
      { placeholder: P, value: 'first-secret-value' },
      { placeholder: Q, value: 'second-secret-value' },
    ];
    expect(substituteHeaderValue(`Basic ${b64(`${Q}:${P}`)}`, subs)).toBe(
      `Basic ${b64('second-secret-value:first-secret-value')}`,
    );
  });
});

describe('scrubHeaderValue', () => {
  it('puts the placeholder back where a response header echoes the secret', () => {
    expect(scrubHeaderValue(`token ${S}`, any)).toBe(`token ${P}`);
  });
  it('leaves short secrets alone (they would match ordinary text)', () => {
    expect(scrubHeaderValue('max-age=0', [{ placeholder: P, value: 'age' }])).toBe('max-age=0');
  });
});
