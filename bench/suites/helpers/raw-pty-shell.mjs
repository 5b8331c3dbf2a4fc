// The terminal rows' baseline: the login shell the terminal tool starts (its default shell and
// arguments: $SHELL when it is bash, else /bin/bash, with -l -i, so the user's rc files and their
// prompt hooks load), in a bare node-pty PTY in the bench process, with nothing of conch's in
// between. A marker appended to PROMPT_COMMAND, after the rc's own hooks, says when the prompt is
// back: what a command typed into a terminal costs done raw (a slow rc hook, such as
// pyenv-virtualenv's, is paid by both sides alike).
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, '..', '..', '..', 'packages', 'process', 'package.json'));
const MARK = '__BENCH_RAW_PROMPT__BACK';

/**
 * Starts the shell in `cwd`; resolves once its first prompt is back. run(command) types a line and
 * resolves when its prompt is back; start(command) types it and returns at once; interrupt() types
 * Ctrl-C and resolves when the prompt is back; close() kills the shell.
 */
export async function startRawShell({ cwd, env = process.env, timeoutMs = 30_000 }) {
  const pty = require('@lydell/node-pty');
  const shell = env.SHELL && basename(env.SHELL) === 'bash' ? env.SHELL : '/bin/bash';
  const child = pty.spawn(shell, ['-l', '-i'], { cwd, env, cols: 200, rows: 50, name: 'xterm' });
  let out = '';
  let waiter;
  const check = () => {
    if (waiter && out.includes(MARK)) {
      const w = waiter;
      waiter = undefined;
      out = '';
      clearTimeout(w.timer);
      w.resolve();
    }
  };
  child.onData((data) => {
    out += data;
    check();
  });
  const promptBack = (what) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiter = undefined;
        reject(new Error(`raw ${shell}: no prompt ${timeoutMs} ms after ${what}: ${out.slice(-300)}`));
      }, timeoutMs);
      waiter = { resolve, timer };
      check();
    });
  const type = (text, what) => {
    out = '';
    const back = promptBack(what);
    child.write(text);
    return back;
  };
  // The typed line shows the marker's halves apart ('%s%s'); only printf's output joins them.
  const [head, tail] = [MARK.slice(0, 10), MARK.slice(10)];
  await type(
    `PROMPT_COMMAND="\${PROMPT_COMMAND%;}\${PROMPT_COMMAND:+;}printf '%s%s\\n' ${head} ${tail}"\r`,
    'setting PROMPT_COMMAND',
  );
  return {
    shell,
    run: (command) => type(`${command}\r`, JSON.stringify(command)),
    start: (command) => {
      out = '';
      child.write(`${command}\r`);
    },
    interrupt: () => type('\x03', 'Ctrl-C'),
    close: () => child.kill('SIGKILL'),
  };
}
