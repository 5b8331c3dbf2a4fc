// Invariant: the provider comes from the environment (OpenAI-compatible, then Anthropic, else the labelled scripted model) and keys never reach the label.
import { describe, expect, it } from 'vitest';
import { chooseModel } from './providers.js';
import { ScriptedDemoModel } from './scripted-model.js';

describe('chooseModel', () => {
  it('uses an OpenAI-compatible server when OPENAI_BASE_URL or OPENAI_API_KEY is set', async () => {
    const choice = await chooseModel({
      OPENAI_BASE_URL: 'http://localhost:11434/v1/',
      OPENAI_API_KEY: 'sk-secret-value',
      CONCH_MODEL: 'qwen2.5-coder:7b',
      ANTHROPIC_API_KEY: 'also-set',
    });
    expect(choice.scripted).toBe(false);
    expect(choice.model.modelId).toBe('qwen2.5-coder:7b');
    expect(choice.label).toBe('qwen2.5-coder:7b (OpenAI-compatible, http://localhost:11434/v1)');
    expect(choice.label).not.toContain('secret');
  });

  it('uses Anthropic when only ANTHROPIC_API_KEY is set', async () => {
    const choice = await chooseModel({ ANTHROPIC_API_KEY: 'sk-ant-secret' });
    expect(choice.scripted).toBe(false);
    expect(choice.model.provider).toMatch(/anthropic/);
    expect(choice.label).toMatch(/\(Anthropic\)$/);
    expect(choice.label).not.toContain('secret');
  });

  it('falls back to the scripted demo model, labelled as such; --scripted forces it', async () => {
    const none = await chooseModel({});
    expect(none.scripted).toBe(true);
    expect(none.model).toBeInstanceOf(ScriptedDemoModel);
    expect(none.label).toMatch(/^scripted demo model \(offline/);
    const forced = await chooseModel({ OPENAI_API_KEY: 'x' }, { scripted: true });
    expect(forced.scripted).toBe(true);
  });
});
