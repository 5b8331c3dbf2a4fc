// Judges an environment variable by its value: names miss credentials (SLACK_WEBHOOK_URL,
// MONGODB_URI, AUTH holding a JWT, STRIPE_SK), their values give them away. Written here rather than
// taken from a secret scanner (gitleaks, detect-secrets, trufflehog are whole programs with rule files
// for scanning repositories): a spawn tests every variable of the host's environment, so the check is
// a few anchored regular expressions and an entropy count, each answer remembered by name and value.

/** Names never hidden whatever a pattern says (a sandbox needs them). */
export const KEPT_ENV: readonly string[] = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'LC_*',
  'TERM',
  'TZ',
  'PWD',
  'OLDPWD',
  'TMPDIR',
  'CONCH_PROC_COOKIE',
];

/** Values that are credentials whatever the variable is called. */
const CREDENTIAL_VALUES: readonly RegExp[] = [
  // a URL carrying a password (postgres://u:p@h, redis://:p@h, https://u:tok@git.host)
  /^[a-z][a-z0-9+.-]*:\/\/[^/\s?#@]*:[^/\s?#@]+@/i,
  // a JWT (header.payload.signature; the header is base64url JSON, so it starts "eyJ")
  /^(?:Bearer\s+)?eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}$/,
  // well-known token prefixes: GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, npm, PyPI,
  // Hugging Face, SendGrid, Google API keys, AWS access key ids, DigitalOcean, Shopify, Twilio
  /^(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,})$/,
  /^xox[abposr]-[A-Za-z0-9-]{10,}$/,
  /^(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}$/,
  /^sk-(?:proj-|ant-(?:api|admin)\d*-)?[A-Za-z0-9_-]{20,}$/,
  /^npm_[A-Za-z0-9]{30,}$/,
  /^pypi-[A-Za-z0-9_-]{40,}$/,
  /^hf_[A-Za-z0-9]{30,}$/,
  /^SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{20,}$/,
  /^AIza[A-Za-z0-9_-]{35}$/,
  /^(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}$/,
  /^(?:dop|doo|dor)_v1_[a-f0-9]{64}$/,
  /^shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}$/,
  /^SK[0-9a-fA-F]{32}$/,
  // webhooks whose URL is the credential
  /^https:\/\/hooks\.slack\.com\/(?:services|workflows|triggers)\//,
  /^https:\/\/(?:\w+\.)?discord(?:app)?\.com\/api\/webhooks\//,
  /^https:\/\/[\w.-]*\.webhook\.office\.com\//,
  // a private key in the environment
  /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
];

/** Names that say "this is a password". */
const PASSWORD_NAME = /(?:^|_)(?:PASS|PASSWD|PASSWORD|PWD|PASSPHRASE)(?:_|$)/i;

/** Names that say "this is a key": a long random value in one is taken for a credential. */
const KEY_LIKE_NAME =
  /(?:KEY|TOKEN|SECRET|PASS|PWD|AUTH|CRED|SIG|SALT|PRIVATE|CERT|SESSION|COOKIE|^SK$|_SK$|^SK_)/i;

/**
 * Names whose values are never credentials (a sandbox needs them as they are), so their values are
 * not looked at: paths, the locale, the terminal, the shell's own state.
 */
const INERT_NAMES = new Set([
  // the names a sandbox keeps whatever a pattern says (KEPT_ENV), and more like them
  ...KEPT_ENV.filter((name) => !name.includes('*')),
  'COLORTERM',
  'SHLVL',
  'HOSTNAME',
  'EDITOR',
  'VISUAL',
  'PAGER',
  'DISPLAY',
  'MANPATH',
  'INFOPATH',
]);

/** Bits of entropy per character of `value` (Shannon, over its characters). */
function entropy(value: string): number {
  const counts = new Map<string, number>();
  for (const ch of value) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) {
    const p = n / value.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

/**
 * Whether a variable's value looks like a credential: a URL with a password, a JWT, a well-known
 * token prefix, a webhook URL, a private key — whatever the name — or a long random string (20+
 * characters, no spaces, 3.5+ bits of entropy per character, letters and digits mixed) in a variable
 * whose name says it is a key. Paths, numbers, booleans and prose are not.
 */
export function looksLikeCredential(name: string, value: string): boolean {
  if (value.length < 8 || value.length > 16_384) return false;
  if (INERT_NAMES.has(name) || name.startsWith('LC_') || name.startsWith('XDG_')) return false;
  for (const pattern of CREDENTIAL_VALUES) if (pattern.test(value)) return true;
  // A variable named a password holds one, however short or plain (SMTP_PASS, MY_SERVICE_PWD).
  if (
    PASSWORD_NAME.test(name) &&
    !value.startsWith('/') &&
    !/^(?:true|false|yes|no|on|off|none|null)$/i.test(value)
  )
    return true;
  if (!KEY_LIKE_NAME.test(name)) return false;
  if (value.length < 20 || /\s/.test(value) || value.startsWith('/')) return false;
  if (!/[A-Za-z]/.test(value) || !/\d/.test(value)) return false;
  return entropy(value) >= 3.5;
}
