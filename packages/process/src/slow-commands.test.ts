// Invariant: one slow-command table serves cli and terminal: a command is slow when its leading words are a pattern's, and the text filter never misses a command the table would match.
import { describe, expect, it } from 'vitest';
import { DEFAULT_SLOW_PATTERNS, estimateSlowSeconds, mayBeSlow, slowEstimate } from './slow-commands.js';

const words = (line: string) => ({ words: line.split(' ') });

describe('slow commands', () => {
  it.each([
    ['npm install', true],
    ['npm run build -- --watch', true],
    ['pnpm test', true],
    ['bundle exec rspec spec/a_spec.rb', true],
    ['rspec', true],
    ['cargo test --release', true],
    ['go build ./...', true],
    ['docker-compose build', true],
    ['mvn package', true],
    ['pytest -x', true],
    ['npm run lint', false],
    ['go vet', false],
    ['echo npm install', false],
    ['cargo', false],
  ])('%s -> slow: %s', (line, slow) => {
    expect(slowEstimate(words(line), DEFAULT_SLOW_PATTERNS) > 0).toBe(slow);
    if (slow) expect(mayBeSlow(line, DEFAULT_SLOW_PATTERNS)).toBe(true);
  });

  it('sums the estimates of a command line and takes extra patterns', () => {
    expect(estimateSlowSeconds([words('npm install'), words('cargo build')], DEFAULT_SLOW_PATTERNS)).toBe(90);
    const extra = [...DEFAULT_SLOW_PATTERNS, { pattern: 'make', seconds: 40 }];
    expect(slowEstimate(words('make all'), extra)).toBe(40);
    expect(mayBeSlow('cd x && make all', extra)).toBe(true);
    expect(mayBeSlow('ls -la; echo hi', DEFAULT_SLOW_PATTERNS)).toBe(false);
  });
});
