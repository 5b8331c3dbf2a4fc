// Drives a program in a private tmux server as a person would: send keys, read the screen.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { descendants } from '@conch/test-support';

export class TmuxSession {
  readonly socket = `conch-e2e-${process.pid}-${randomBytes(3).toString('hex')}`;
  readonly name = 'demo';

  constructor(
    command: string,
    options: { cwd: string; env: Record<string, string>; width?: number; height?: number },
  ) {
    const envArgs = Object.entries(options.env).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
    this.tmux(
      'new-session',
      '-d',
      '-s',
      this.name,
      '-x',
      String(options.width ?? 150),
      '-y',
      String(options.height ?? 50),
      '-c',
      options.cwd,
      ...envArgs,
      command,
    );
    this.tmux('set-option', '-t', this.name, 'remain-on-exit', 'on');
    this.tmux('set-option', '-t', this.name, 'history-limit', '20000');
  }

  /** The screen plus scrollback, as text. */
  screen(): string {
    return this.tmux('capture-pane', '-p', '-J', '-S', '-20000', '-t', this.name);
  }

  /** Types literal text (no key names) and optionally Enter. */
  type(text: string, enter = true): void {
    this.tmux('send-keys', '-t', this.name, '-l', text);
    if (enter) this.tmux('send-keys', '-t', this.name, 'Enter');
  }

  key(name: string): void {
    this.tmux('send-keys', '-t', this.name, name);
  }

  /** The pid of the program in the pane (the app itself when started with exec). */
  panePid(): number {
    return Number(this.tmux('display-message', '-p', '-t', this.name, '#{pane_pid}').trim());
  }

  paneDead(): boolean {
    return this.tmux('display-message', '-p', '-t', this.name, '#{pane_dead}').trim() === '1';
  }

  async waitForScreen(test: (screen: string) => boolean, what: string, timeoutMs = 90_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    let screen = '';
    while (Date.now() < deadline) {
      screen = this.screen();
      if (test(screen)) return screen;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`timed out waiting for ${what}; screen:\n${screen}`);
  }

  kill(): void {
    try {
      this.tmux('kill-server');
    } catch {
      // already gone
    }
  }

  private tmux(...args: string[]): string {
    return execFileSync('tmux', ['-L', this.socket, ...args], { encoding: 'utf8' });
  }
}

export function hasTmux(): boolean {
  try {
    execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Width and height of a PNG file (from its IHDR), or undefined when it is not one. */
export function pngSize(path: string): { width: number; height: number } | undefined {
  const data = readFileSync(path);
  if (
    data.length < 24 ||
    data.toString('latin1', 1, 4) !== 'PNG' ||
    data.toString('latin1', 12, 16) !== 'IHDR'
  )
    return undefined;
  return { width: data.readUInt32BE(16), height: data.readUInt32BE(20) };
}

/**
 * `pid`'s live descendants but the registry's process supervisors (and the bwrap around a
 * sandboxed one): the processes commands started. The supervisors live as long as the registry.
 */
export function commandDescendantsOf(pid: number): number[] {
  return descendants(pid).filter((p) => {
    try {
      return !readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('supervisor-main.js');
    } catch {
      return false;
    }
  });
}
