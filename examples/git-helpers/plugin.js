// A conch plugin made only of data: the tools are the UTCP `cli` call templates in manual.json
// (a UTCP manual that loads unchanged). @conch/cli turns each into a tool that runs through the
// same process layer, permission gate and background handoff as cli_based_tool.
import { loadUtcpManualPlugin } from '@conch/cli';

export default loadUtcpManualPlugin(new URL('./manual.json', import.meta.url), {
  name: 'git-helpers',
  systemInstructions:
    'git_status_summary, git_recent_log and git_diff_stat give compact, read-only views of a git repository; prefer them to raw git commands for a quick look.',
});
