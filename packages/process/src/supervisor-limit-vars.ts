/**
 * The environment variables a ProcessManager starts a sandboxed supervisor with to carry the
 * sandbox's limits (see sandbox-limits.ts and supervisor-limits.ts). Their own module: the
 * supervisor imports only small modules, so it starts fast.
 */

/** Tasks the sandbox may hold (the process-limit watch runs when set). */
export const PROCESS_LIMIT_VAR = 'CONCH_PROCESS_LIMIT';
/** `1` with cgroup v2: watch the supervisor's own cgroup's pids.events (`max`: forks refused at pids.max). */
export const PIDS_EVENTS_VAR = 'CONCH_PIDS_EVENTS';
/** The oom_score_adj the supervisor gives itself (and so everything it starts). */
export const OOM_SCORE_ADJ_VAR = 'CONCH_OOM_SCORE_ADJ';
