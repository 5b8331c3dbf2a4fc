// The one shell-quoting function lives in @conch/shell-syntax (tested against bash, dash and zsh).
export { shellQuote as quoteWord } from '@conch/shell-syntax';
