import { readlinkSync } from 'node:fs';
import type { PtySession } from './pty-session.js';

/**
 * Input that reaches a shell is a command. When a session's foreground job is a shell reading
 * commands from the terminal (the model ran `bash`, `sh`, `exec zsh`, ... and now types into it),
 * typed text is judged by the permission gate like a `command`; input to any other program (a
 * password prompt, a Python REPL, `[Y/n]`) is not.
 *
 * What is judged is everything the shell would run: text typed into it earlier without a line end
 * (kept per session), plus this input, without its final newline. Input with no line end and no
 * control character cannot run anything and is only remembered; a lone Ctrl-C or Ctrl-D is never
 * judged (an interrupt, an end of input). Any other control character is judged with the text:
 * editing keys (history recall, completion) can change what runs, so the gate sees them.
 */
export interface JudgedInput {
  /** What the gate judges. */
  command: string;
  /** Where the shell reading it is. */
  cwd: string;
  /** The shell reading the input. */
  reader: { pid: number; shell: string };
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
// eslint-disable-next-line no-control-regex
const ONLY_INTERRUPT_OR_EOF = /^[\u0003\u0004]+$/;
// eslint-disable-next-line no-control-regex
const LINE_KILLERS = /[\r\n\u0003\u0015]/;

export interface InputInspection {
  /** The request the gate must judge, when the input reaches a shell and can run something. */
  judged?: JudgedInput;
  /** What the foreground shell's line holds once the input was typed (to remember). */
  line?: { pid: number; text: string };
}

/** Where `input` would go if typed now, and what the gate must judge of it. */
export function inspectInput(session: PtySession, input: string): InputInspection {
  if (input === '' || ONLY_INTERRUPT_OR_EOF.test(input)) return {};
  const reader = session.commandReader();
  if (!reader) return {};
  const pending = session.shellLine?.pid === reader.pid ? session.shellLine.text : '';
  const text = pending + input;
  const parts = text.split(LINE_KILLERS);
  const line = { pid: reader.pid, text: parts[parts.length - 1]! };
  if (!CONTROL.test(input)) return { line };
  const command = text.replace(/\r\n?/g, '\n').replace(/\n$/, '');
  if (command.trim() === '') return { line };
  let cwd = session.cwd;
  try {
    cwd = readlinkSync(`/proc/${reader.pid}/cwd`);
  } catch {
    // not Linux, or gone: the session's cwd
  }
  return { judged: { command, cwd, reader }, line };
}
