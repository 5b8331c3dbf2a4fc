import { ConchError, formatIssues, type ValidationIssue } from '@conch/core';

/**
 * The host's `credentials` configuration is wrong: each issue names the field (`credentials.0.hosts.1`),
 * what was expected and what was given — never a secret's text (a `value` is described by its length).
 */
export class InvalidCredentialConfigError extends ConchError {
  readonly issues: readonly ValidationIssue[];

  constructor(issues: readonly ValidationIssue[]) {
    super({
      code: 'INVALID_CREDENTIAL_CONFIG',
      message: `Invalid credentials config:\n  ${formatIssues(issues)}`,
    });
    this.name = 'InvalidCredentialConfigError';
    this.issues = issues;
  }
}
