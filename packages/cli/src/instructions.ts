import type { CliConfig } from './config.js';

/**
 * 50000 -> '50,000'. Not toLocaleString: its first call loads ICU's number formatting, about 10 ms
 * of a conch-mcp start spent on one comma.
 */
function thousands(n: number): string {
  return String(Math.trunc(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** The cli plugin's guidance for the model: modes, truncation, the error table, task handles. */
export function cliInstructions(config: CliConfig, backgroundAvailable: boolean): string {
  const lines = [
    'cli_based_tool runs a shell command on the local machine and returns { stdout, stderr, returncode, mode }.',
    '- A single simple command (e.g. `git status`) runs directly without a shell; pipes, redirections, &&/||/;, $(...), globs and variables run through bash. Pass `args` to give an executable its arguments without any shell interpretation.',
    '- stdin is closed: commands that wait for input fail instead of hanging. Use non-interactive flags (-y, --yes, --no-edit, -m "msg").',
    `- Output over ${thousands(config.maxOutputChars)} characters is truncated (truncated: true) to its start and end; the full output is in output_file. Narrow the command instead of repeating it: | grep PATTERN, | head -50, | tail -50, find -maxdepth 2, git log --oneline | head -20.`,
    'Errors:',
    '- non-zero returncode: read stderr for details.',
    '- "File exists": the goal is already achieved; continue.',
    '- "Permission denied": try an alternative approach or report the blocker; never use sudo.',
    '- "Command not found": check whether the tool is installed (command -v NAME) or use an alternative.',
    '- "No such file": verify the path exists first (ls, find).',
  ];
  if (backgroundAvailable) {
    lines.push(
      `Long commands: known slow commands (installs, builds, test suites, clones) and any command still running after ${config.autoBackgroundThreshold}s return { background_task_id, status, message } instead of blocking; the command keeps running with nothing lost.`,
      '- Then call check_background_task({ task_id, wait_seconds: 30 }) to wait for the result, read_background_output to page through output so far, cancel_background_task to stop it. Pass background: true to start a command (e.g. a dev server) in the background on purpose, background: false to wait for it in the foreground (with a timeout in seconds).',
      '- A command that finished but left processes running (`server & echo started`) returns its own result plus left_running and left_running_task_id: that task is what it left behind (it may never end); read its output or cancel it, do not wait for it.',
    );
  } else {
    lines.push(
      `Long commands: a command running longer than ${config.autoBackgroundThreshold}s is killed (no background tasks here); pass timeout (seconds) when a command needs longer.`,
    );
  }
  return lines.join('\n');
}
