import { ConchError } from './conch-error.js';

/** Two plugins provided the same service token. */
export class DuplicateServiceError extends ConchError {
  readonly service: string;

  constructor(service: string, existingPlugin: string, newPlugin: string) {
    super({
      code: 'DUPLICATE_SERVICE',
      message: `plugin '${newPlugin}' provides the service '${service}', which plugin '${existingPlugin}' already provides; a service has one provider per registry`,
    });
    this.name = 'DuplicateServiceError';
    this.service = service;
  }
}

/** registry.resolve() of a service no exposed plugin provides. */
export class NoSuchServiceError extends ConchError {
  readonly service: string;
  readonly availableServices: string[];

  constructor(service: string, available: string[]) {
    super({
      code: 'NO_SUCH_SERVICE',
      message: `no exposed plugin provides the service '${service}'${available.length ? ` (provided: ${available.join(', ')})` : ''}; expose the plugin that provides it first, or use resolveOptional()`,
    });
    this.name = 'NoSuchServiceError';
    this.service = service;
    this.availableServices = available;
  }
}
