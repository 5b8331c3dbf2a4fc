// Prompts that wait for an answer are recognised from the unfinished last line; finished lines never are.
import { describe, expect, it } from 'vitest';
import { looksLikePrompt } from './prompt-detector.js';

describe('looksLikePrompt', () => {
  it.each([
    '[sudo] password for ada: ',
    'Password:',
    'Enter passphrase for key /home/a/.ssh/id_ed25519: ',
    'Continue? [Y/n] ',
    'Do you want to continue? [y/N]',
    'Are you sure you want to continue connecting (yes/no/[fingerprint])? ',
    'Proceed (y/n)? ',
    '>>> ',
    '... ',
    'name? ',
    '? Project name: (my-app) ',
    'Press any key to continue . . .',
    'Press Enter to continue',
    'mysql> ',
    'postgres=# ',
    'irb(main):001:0> ',
    'Your name: ',
  ])('recognises %j', (line) => {
    expect(looksLikePrompt(`some output\n${line}`)).toBe(true);
  });

  it.each([
    'Compiling foo v0.1.0\n',
    'Continue? [Y/n]\n',
    'password: ok\n',
    '',
    'building',
    '  42%',
    'Downloading https://example.com/some/long/path/that/goes/on/and/on/and/on/and/on/and/on/file.tar.gz: ',
  ])('does not take %j for a prompt', (text) => {
    expect(looksLikePrompt(text)).toBe(false);
  });
});
