// What a denial over MCP tells the user to do: nobody can edit rules mid-call, so the advice names
// the config file and key — and a built-in safety rule is said to be one no allow rule overrides.
import { describe, expect, test } from 'vitest';
import { denialAdvice, toCallToolResult } from './to-call-tool-result.js';

const denied = (rule: string, suggestion?: string) => ({
  error: 'Permission denied: ...',
  error_code: 'PERMISSION_DENIED',
  display: '[Blocked] ...',
  permission_denied: true,
  rule,
  ...(suggestion ? { suggestion } : {}),
});
const file = { path: '/home/me/conch.config.json', exists: true };

describe('denialAdvice', () => {
  test('a safety denial: no allow rule overrides it; the safety key in the config file turns it off', () => {
    const advice = denialAdvice(
      denied(
        'safety:privilegeEscalation',
        'This is the built-in safety rule "privilegeEscalation"; the host can turn it off with safety.privilegeEscalation: false.',
      ),
      { configFile: file },
    );
    expect(advice).toContain('built-in safety rule "privilegeEscalation"');
    expect(advice).toContain('no rules.allow entry overrides it');
    expect(advice).toContain(
      'set plugins.permission.safety.privilegeEscalation to false in /home/me/conch.config.json',
    );
    expect(advice).not.toMatch(/add that rule/);
  });

  test('a safety denial on the built-in default says which file to create, with what', () => {
    const advice = denialAdvice(denied('safety:downloadToInterpreter', 'Download the script ...'), {
      configFile: { path: '/w/conch.config.json', exists: false },
    });
    expect(advice).toContain('Download the script to a file, read it, then run the file.');
    expect(advice).toContain(
      'create /w/conch.config.json with {"plugins":{"permission":{"safety":{"downloadToInterpreter":false}},"cli":{},"background":{},"files":{}}}',
    );
  });

  test('an ask denied for want of elicitation names the rule and the file it goes in', () => {
    const advice = denialAdvice(denied('unknown', 'Add "make deploy" to rules.allow to allow it.'), {
      configFile: file,
    });
    expect(advice).toBe(
      'Add "make deploy" to rules.allow to allow it.\nTo allow it without asking, add that rule to plugins.permission.rules.allow in /home/me/conch.config.json and restart conch-mcp.',
    );
  });

  test('a deny rule, readOnly mode, and denials with nothing to configure', () => {
    expect(
      denialAdvice(denied('deny:rm *', 'Remove "rm *" from rules.deny to allow it.'), { configFile: file }),
    ).toBe(
      'This command is denied by the rule "rm *" in plugins.permission.rules.deny of /home/me/conch.config.json: to allow it, remove that rule there and restart conch-mcp.',
    );
    expect(
      denialAdvice(denied('mode:readOnly', 'Add "x" to rules.allow to allow it.'), { configFile: file }),
    ).toContain('set plugins.permission.mode to "default" in /home/me/conch.config.json');
    // A human said no; a command too long to show: no config can help.
    expect(denialAdvice(denied('unknown'), { configFile: file })).toBeUndefined();
    expect(denialAdvice(denied('failClosed:display', 'Split it into shorter commands.'))).toBeUndefined();
    expect(denialAdvice({ stdout: '', returncode: 1 })).toBeUndefined();
  });

  test('toCallToolResult appends the advice as a second text', () => {
    const result = toCallToolResult(denied('safety:forkBomb', 'x'), { configFile: file });
    expect(result.isError).toBe(true);
    expect(result.content).toHaveLength(2);
    expect((result.content[1] as { text: string }).text).toContain('no rules.allow entry overrides it');
  });
});
