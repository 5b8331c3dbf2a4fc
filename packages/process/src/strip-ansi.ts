/**
 * Text as a model should read it. One renderer serves every tool (cli captures, terminal PTY
 * transcripts, background logs), so `100%\rok` reads the same whichever tool ran it: the way a
 * terminal would finally show it.
 */

/**
 * Terminal control sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks; BEL or ST
 * terminated), DCS/SOS/PM/APC strings, two-byte escapes and charset designations.
 */
const ANSI =
  // eslint-disable-next-line no-control-regex
  /\u001b\][\s\S]*?(?:\u0007|\u001b\\|$)|\u001b[PX^_][\s\S]*?(?:\u001b\\|$)|(?:\u001b\[|\u009b)[0-?]*[ -/]*[@-~]|\u001b[()*+#%][0-9A-Za-z@]|\u001b[ -/]*[0-~]/g;

// eslint-disable-next-line no-control-regex
const HAS_ESC = /[\u001b\u009b]/;

/* eslint-disable no-control-regex -- terminal control characters are the point */
// Control characters other than \t \n \r \b that mean nothing on a page (BEL, NUL, SO/SI, ...).
const OTHER_CONTROLS = /[\u0000-\u0007\u000b\u000c\u000e-\u001a\u001c-\u001f\u007f]/g;
// What makes a line need rendering rather than stripping: \r, \b, or an escape sequence.
const LINE_EDITS = /[\r\b\u001b\u009b]/;
// The two sequences progress bars move with: erase in line (CSI [0-2] K), cursor to column (CSI n G).
const ERASE_IN_LINE = /^(?:\u001b\[|\u009b)([012]?)K$/;
const CURSOR_COLUMN = /^(?:\u001b\[|\u009b)(\d*)G$/;
/* eslint-enable no-control-regex */

/** Removes terminal control sequences; plain text, tabs and newlines are kept. */
export function stripAnsi(text: string): string {
  if (!HAS_ESC.test(text)) return text;
  return text.replace(ANSI, '');
}

/**
 * Renders one line (no `\n`) the way a terminal leaves it: `\r` returns the cursor to column 0 and
 * later text overwrites (`100%\rok` → `ok0%`), `\b` moves one column left, `ESC[K` (erase in line)
 * and `ESC[nG` (cursor to column) are applied, every other escape sequence is dropped.
 */
export function applyLineEdits(line: string): string {
  if (!LINE_EDITS.test(line)) return line;
  const cells: string[] = [];
  let cursor = 0;
  const put = (text: string) => {
    for (const ch of text) {
      if (ch === '\r') cursor = 0;
      else if (ch === '\b') cursor = Math.max(0, cursor - 1);
      else cells[cursor++] = ch;
    }
  };
  ANSI.lastIndex = 0;
  let from = 0;
  for (let m = ANSI.exec(line); m; m = ANSI.exec(line)) {
    put(line.slice(from, m.index));
    from = m.index + m[0].length;
    const erase = ERASE_IN_LINE.exec(m[0]);
    const column = erase ? null : CURSOR_COLUMN.exec(m[0]);
    if (erase?.[1] === '2') cells.length = 0;
    else if (erase?.[1] === '1') cells.fill(' ', 0, Math.min(cursor + 1, cells.length));
    else if (erase) cells.length = Math.min(cells.length, cursor);
    else if (column) cursor = Math.max(0, Number(column[1] || '1') - 1);
  }
  ANSI.lastIndex = 0;
  put(line.slice(from));
  // A cursor moved past the end leaves blanks, as on screen.
  return Array.from(cells, (ch) => ch ?? ' ').join('');
}

/**
 * Text as a model should read it: CRLF normalised, control sequences removed, and each line's
 * `\r`/`\b`/erase rewrites (progress bars) applied as a terminal shows them.
 */
export function cleanForModel(text: string): string {
  let out = text;
  if (out.includes('\r')) out = out.replace(/\r+\n/g, '\n');
  // Escape sequences first (an OSC ends at BEL, one of the controls dropped next), keeping the two
  // that move the cursor within a line for the per-line rendering below.
  if (HAS_ESC.test(out)) out = out.replace(ANSI, (seq) => (isLineMove(seq) ? seq : ''));
  out = out.replace(OTHER_CONTROLS, '');
  if (!LINE_EDITS.test(out)) return out;
  return out.split('\n').map(applyLineEdits).join('\n');
}

function isLineMove(seq: string): boolean {
  return ERASE_IN_LINE.test(seq) || CURSOR_COLUMN.test(seq);
}
