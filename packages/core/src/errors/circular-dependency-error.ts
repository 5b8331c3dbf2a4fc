import { ConchError } from './conch-error.js';

/** Plugins whose required services (`needs` / `provides`) form a cycle, so none can be exposed first. */
export class CircularDependencyError extends ConchError {
  /** The plugins of the cycle, in order; the first one needs a service of the second, and so on. */
  readonly plugins: readonly string[];

  constructor(plugins: readonly string[], tokens: readonly string[] = []) {
    const chain = plugins
      .map((p, i) => `'${p}'${tokens[i] ? ` needs '${tokens[i]}' from` : ''}`)
      .concat(plugins.length ? [`'${plugins[0]}'`] : [])
      .join(' ');
    super({
      code: 'CIRCULAR_DEPENDENCY',
      message: `Circular dependency between plugins ${plugins.map((p) => `'${p}'`).join(' and ')}: ${chain}. Make one of the needs optional ({ token, optional: true }) and resolve it at call time.`,
    });
    this.name = 'CircularDependencyError';
    this.plugins = plugins;
  }
}
