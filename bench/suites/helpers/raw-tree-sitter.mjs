// tree-sitter-bash through web-tree-sitter with nothing on top (the same WASM grammar and runtime
// @conch/shell-syntax loads): the floor under any parse-based judgement of a command, the baseline
// of the shell-syntax and permission rows.
import { createRequire } from 'node:module';

/** Returns parse(source): one raw tree-sitter parse of `source`, its tree freed. */
export async function rawTreeSitter() {
  const shellSyntax = import.meta.resolve('@conch/shell-syntax');
  const require = createRequire(shellSyntax);
  const { Language, Parser } = await import(require.resolve('web-tree-sitter'));
  const { BASH_GRAMMAR_WASM } = await import(shellSyntax);
  await Parser.init();
  const parser = new Parser();
  parser.setLanguage(await Language.load(BASH_GRAMMAR_WASM));
  return (source) => parser.parse(source).delete();
}
