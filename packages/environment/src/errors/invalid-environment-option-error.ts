import { ConchError, describeValue } from '@conch/core';

/** createEnvironment() got an option of the wrong type or value. */
export class InvalidEnvironmentOptionError extends ConchError {
  readonly field: string;

  constructor(field: string, expected: string, received: unknown, code = 'INVALID_ENVIRONMENT_OPTION') {
    super({
      code,
      message: `environment option '${field}': expected ${expected}; received ${describeValue(received)}`,
    });
    this.name = 'InvalidEnvironmentOptionError';
    this.field = field;
  }
}

/**
 * `executor.kind` names an executor this release cannot run commands on.
 * @deprecated every kind of @conch/exec-server runs now; createEnvironment no longer throws it
 * (a bad executor config is an InvalidEnvironmentOptionError naming the field). Kept for imports.
 */
export class UnsupportedExecutorError extends InvalidEnvironmentOptionError {
  constructor(kind: unknown) {
    super(
      'executor.kind',
      "'local' (ssh, container, kubernetes and bubblewrap executors come with @conch/exec-server)",
      kind,
      'UNSUPPORTED_EXECUTOR',
    );
    this.name = 'UnsupportedExecutorError';
  }
}
