import type { LanguageModelV4 } from '@ai-sdk/provider';
import type { LogWarningsFunction } from 'ai';
import type { Logger } from 'pino';
import { ScriptedDemoModel } from './scripted-model.js';

export interface ModelChoice {
  model: LanguageModelV4;
  /** What the header shows, e.g. "openai-compatible gpt-4.1-mini @ http://localhost:11434/v1". */
  label: string;
  scripted: boolean;
}

export const DEFAULT_OPENAI_MODEL = 'gpt-4.1-mini';
export const DEFAULT_ANTHROPIC_MODEL = 'claude-sonnet-4-5';

/**
 * Picks the model from the environment: an OpenAI-compatible server when OPENAI_BASE_URL or
 * OPENAI_API_KEY is set, Anthropic when ANTHROPIC_API_KEY is set, else the offline scripted model.
 * Each is a `LanguageModelV4`, the spec ai 7 calls natively (an older one would log a
 * compatibility warning on every call).
 * Keys are read here and handed to the provider; they are never printed or logged.
 */
export async function chooseModel(
  env: NodeJS.ProcessEnv,
  options: { scripted?: boolean; scriptedOptions?: ConstructorParameters<typeof ScriptedDemoModel>[0] } = {},
): Promise<ModelChoice> {
  const modelId = env.CONCH_MODEL?.trim() || undefined;
  if (!options.scripted && (env.OPENAI_BASE_URL || env.OPENAI_API_KEY)) {
    const baseURL = (env.OPENAI_BASE_URL || 'https://api.openai.com/v1').replace(/\/+$/, '');
    // Providers load on demand: the offline demo never pays for them.
    const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
    const provider = createOpenAICompatible({
      name: 'openai-compatible',
      baseURL,
      ...(env.OPENAI_API_KEY ? { apiKey: env.OPENAI_API_KEY } : {}),
    });
    const id = modelId ?? DEFAULT_OPENAI_MODEL;
    return { model: provider.chatModel(id), label: `${id} (OpenAI-compatible, ${baseURL})`, scripted: false };
  }
  if (!options.scripted && env.ANTHROPIC_API_KEY) {
    const { createAnthropic } = await import('@ai-sdk/anthropic');
    const provider = createAnthropic({
      apiKey: env.ANTHROPIC_API_KEY,
      // The provider would read it from process.env itself; this reads it from `env`, like the rest.
      ...(env.ANTHROPIC_BASE_URL ? { baseURL: env.ANTHROPIC_BASE_URL } : {}),
    });
    const id = modelId ?? DEFAULT_ANTHROPIC_MODEL;
    return { model: provider(id), label: `${id} (Anthropic)`, scripted: false };
  }
  return {
    model: new ScriptedDemoModel(options.scriptedOptions),
    label: 'scripted demo model (offline: set OPENAI_API_KEY or ANTHROPIC_API_KEY for a real one)',
    scripted: true,
  };
}

/**
 * Sends the AI SDK's warnings (a setting the provider does not support, a model id it does not
 * know …) to the demo's log: written to stderr, as ai does by default, they would tear the terminal
 * UI. The demo's models all speak the current spec, so ai 7 has no compatibility mode to warn about.
 */
export function logSdkWarnings(logger: Logger): void {
  const log: LogWarningsFunction = ({ warnings, provider, model }) =>
    logger.warn({ provider, model, warnings }, 'AI SDK warning');
  globalThis.AI_SDK_LOG_WARNINGS = log;
}
