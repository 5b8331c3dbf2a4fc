import type { CredentialScheme } from './credential-config.js';

/** One placeholder to replace with its secret in a header, under a scheme or any. */
export interface Substitution {
  placeholder: string;
  value: string;
  scheme?: CredentialScheme | undefined;
}

/** `<scheme> <credentials>` of an Authorization-style value (RFC 9110 §11.4). */
const SCHEMED = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)([ \t]+)(.*)$/s;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function replaceAll(text: string, subs: readonly Substitution[]): string {
  let out = text;
  for (const sub of subs) if (out.includes(sub.placeholder)) out = out.split(sub.placeholder).join(sub.value);
  return out;
}

/**
 * One header value with the placeholders of `subs` replaced by their secrets:
 *
 * - `Basic <base64>`: the base64 is decoded (as bytes: a password need not be UTF-8), the
 *   placeholder replaced wherever it stands in `user:password`, and encoded again — how git and
 *   curl `-u` send a token;
 * - `<scheme> <credentials>` (`token`, `Bearer`, any other): the placeholder replaced in the
 *   credentials for a substitution of that scheme (compared without case, as schemes are);
 * - a substitution without a scheme also replaces the placeholder anywhere in the value (a bare
 *   `X-Api-Key: <placeholder>`, `Bearer <placeholder>`, `Basic <placeholder>` not encoded).
 *
 * Returns the value itself when nothing applied.
 */
export function substituteHeaderValue(value: string, subs: readonly Substitution[]): string {
  const m = SCHEMED.exec(value);
  if (m) {
    const [, scheme, gap, rest] = m as unknown as [string, string, string, string];
    const lower = scheme.toLowerCase();
    const schemed = subs.filter((s) => s.scheme?.toLowerCase() === lower);
    if (lower === 'basic') {
      const encoded = rest.trim();
      const basic = subs.filter((s) => s.scheme === undefined || s.scheme === 'Basic');
      if (basic.length && BASE64.test(encoded)) {
        const decoded = Buffer.from(encoded, 'base64').toString('latin1');
        const replaced = replaceAll(decoded, basic);
        if (replaced !== decoded)
          return `${scheme}${gap}${Buffer.from(replaced, 'latin1').toString('base64')}`;
      }
    } else if (schemed.length) {
      const replaced = replaceAll(rest, schemed);
      if (replaced !== rest) return replaceAll(`${scheme}${gap}${replaced}`, unschemed(subs));
    }
  }
  return replaceAll(value, unschemed(subs));
}

function unschemed(subs: readonly Substitution[]): Substitution[] {
  return subs.filter((s) => s.scheme === undefined);
}

/**
 * A response header value with any secret of `subs` put back to its placeholder: a configured host
 * that echoes a request header (a debug endpoint, an error page's headers) shows the sandbox only
 * the placeholder there. Bodies are not scrubbed (they may be compressed): see the README's risks.
 * Secrets shorter than 8 characters are left alone (they would match ordinary header text).
 */
export function scrubHeaderValue(value: string, subs: readonly Substitution[]): string {
  let out = value;
  for (const sub of subs)
    if (sub.value.length >= 8 && out.includes(sub.value)) out = out.split(sub.value).join(sub.placeholder);
  return out;
}
