/**
 * The one table of commands known to run long: installs, builds, test suites, image builds,
 * clones. The cli plugin starts them as background tasks (by their estimate); the terminal plugin
 * gives them a long timeout and no idle return. It lives here, in the process layer both plugins
 * already build on, because it is about running commands, not about reading them: matching takes
 * parsed commands (`{ words }`, e.g. @conch/shell-syntax's `SimpleCommand`) and needs no parser.
 */

/** A slow command: its leading words and an estimate of how long it runs. */
export interface SlowPattern {
  /** Leading words of a simple command, e.g. 'npm install' or 'cargo build'. */
  pattern: string;
  /** Estimated duration in seconds. */
  seconds: number;
}

/**
 * Known slow commands (jaato's table and the Clacky terminal's, merged). A pattern matches a simple
 * command whose leading words are the pattern's words (`npm run build -- --watch` matches
 * `npm run build`; `rspec spec/a_spec.rb` matches `rspec`).
 */
export const DEFAULT_SLOW_PATTERNS: readonly SlowPattern[] = [
  // JavaScript
  { pattern: 'npm install', seconds: 30 },
  { pattern: 'npm i', seconds: 30 },
  { pattern: 'npm ci', seconds: 30 },
  { pattern: 'npm run build', seconds: 30 },
  { pattern: 'npm run test', seconds: 30 },
  { pattern: 'npm test', seconds: 30 },
  { pattern: 'yarn install', seconds: 30 },
  { pattern: 'yarn build', seconds: 30 },
  { pattern: 'yarn test', seconds: 30 },
  { pattern: 'yarn run build', seconds: 30 },
  { pattern: 'yarn run test', seconds: 30 },
  { pattern: 'pnpm install', seconds: 30 },
  { pattern: 'pnpm i', seconds: 30 },
  { pattern: 'pnpm build', seconds: 30 },
  { pattern: 'pnpm test', seconds: 30 },
  { pattern: 'pnpm run build', seconds: 30 },
  { pattern: 'pnpm run test', seconds: 30 },
  // Ruby
  { pattern: 'bundle install', seconds: 30 },
  { pattern: 'bundle update', seconds: 30 },
  { pattern: 'bundle exec rspec', seconds: 30 },
  { pattern: 'rspec', seconds: 30 },
  { pattern: 'rake test', seconds: 30 },
  { pattern: 'rails test', seconds: 30 },
  // Rust, Go, JVM
  { pattern: 'cargo build', seconds: 60 },
  { pattern: 'cargo test', seconds: 60 },
  { pattern: 'go build', seconds: 30 },
  { pattern: 'go test', seconds: 30 },
  { pattern: 'mvn install', seconds: 60 },
  { pattern: 'mvn test', seconds: 60 },
  { pattern: 'mvn package', seconds: 60 },
  { pattern: 'gradle build', seconds: 60 },
  // Python
  { pattern: 'pytest', seconds: 30 },
  { pattern: 'python -m pytest', seconds: 30 },
  { pattern: 'python3 -m pytest', seconds: 30 },
  { pattern: 'pip install', seconds: 20 },
  { pattern: 'pip3 install', seconds: 20 },
  // Containers, VCS
  { pattern: 'docker build', seconds: 60 },
  { pattern: 'docker-compose build', seconds: 60 },
  { pattern: 'docker compose build', seconds: 60 },
  { pattern: 'git clone', seconds: 20 },
];

/** A command as the matcher needs it: its words after quote removal (assignments not included). */
export interface CommandWords {
  readonly words: readonly string[];
}

const firstWords = new WeakMap<readonly SlowPattern[], Set<string>>();
const splitCache = new WeakMap<readonly SlowPattern[], { words: string[]; seconds: number }[]>();

function split(patterns: readonly SlowPattern[]): { words: string[]; seconds: number }[] {
  let out = splitCache.get(patterns);
  if (!out) {
    out = patterns.map((p) => ({ words: p.pattern.trim().split(/\s+/), seconds: p.seconds }));
    splitCache.set(patterns, out);
  }
  return out;
}

/**
 * The estimate of one command: the largest estimate among the patterns whose words are its leading
 * words (0 when none matches).
 */
export function slowEstimate(command: CommandWords, patterns: readonly SlowPattern[]): number {
  let best = 0;
  for (const p of split(patterns)) {
    if (p.words.length > command.words.length) continue;
    if (p.words.every((w, i) => command.words[i] === w)) best = Math.max(best, p.seconds);
  }
  return best;
}

/** Estimated seconds of a command line: the sum over its simple commands (0 when none is slow). */
export function estimateSlowSeconds(
  commands: readonly CommandWords[],
  patterns: readonly SlowPattern[],
): number {
  let total = 0;
  for (const command of commands) total += slowEstimate(command, patterns);
  return total;
}

/**
 * Whether a command line may contain a slow command, from its text alone: one of its words is the
 * first word of a pattern. A cheap filter before parsing (false means no pattern can match).
 */
export function mayBeSlow(line: string, patterns: readonly SlowPattern[]): boolean {
  let firsts = firstWords.get(patterns);
  if (!firsts) {
    firsts = new Set(split(patterns).map((p) => p.words[0]!));
    firstWords.set(patterns, firsts);
  }
  for (const word of line.split(/[\s;&|()`$<>{}"'\\]+/)) if (firsts.has(word)) return true;
  return false;
}
