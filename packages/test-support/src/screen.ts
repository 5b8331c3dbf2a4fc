/**
 * Outputs with carriage returns, backspaces and erase sequences, and what a terminal finally shows
 * for each: every tool that returns command output (cli_based_tool, terminal, background logs)
 * must render them the same way. `printf` is the shell's printf format that prints `raw`.
 */
export const SCREEN_CASES: readonly { name: string; printf: string; screen: string }[] = [
  { name: 'a shorter rewrite leaves the tail', printf: String.raw`100%%\rok\n`, screen: 'ok0%' },
  { name: 'a progress bar', printf: String.raw`10%%\r50%%\r100%%\ndone\n`, screen: '100%\ndone' },
  { name: 'erase in line after a return', printf: String.raw`long status\r\033[Kshort\n`, screen: 'short' },
  {
    name: 'cursor to column 1 and erase',
    printf: String.raw`\033[1G50%%\033[1G\033[0K100%%\n`,
    screen: '100%',
  },
  { name: 'backspaces', printf: String.raw`abc\b\bX\n`, screen: 'aXc' },
  { name: 'colours dropped', printf: String.raw`\033[31mred\033[0m\rR\n`, screen: 'Red' },
];
