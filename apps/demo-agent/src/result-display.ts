// How the demo reads a tool result: by the one-line `display` every result carries and, on a
// failure, its `error_code` (@conch/core results.ts) — never by probing tool-specific fields.

/**
 * What a result's `display` says: `ok` (`✓ …`), `failed` (`✗ CODE: …`, or any `error_code`),
 * `blocked` (`[Blocked] reason`: the permission gate or the user said no), or `state` (any other
 * text: a session `waiting`, a task `running` in the background, a page's status and title).
 */
export type ResultKind = 'ok' | 'failed' | 'blocked' | 'state';

export interface ResultSummary {
  kind: ResultKind;
  /** The result's `display`; '' when it has none. */
  display: string;
  /** The result's `error_code`, on a failure. */
  errorCode: string | undefined;
}

export function readResult(result: unknown): ResultSummary {
  const r = (typeof result === 'object' && result !== null ? result : {}) as {
    display?: unknown;
    error_code?: unknown;
  };
  const display = typeof r.display === 'string' ? r.display : '';
  const errorCode = typeof r.error_code === 'string' ? r.error_code : undefined;
  let kind: ResultKind;
  if (errorCode === 'PERMISSION_DENIED' || display.startsWith('[Blocked]')) kind = 'blocked';
  else if (errorCode !== undefined || display.startsWith('✗')) kind = 'failed';
  else if (display.startsWith('✓')) kind = 'ok';
  else kind = 'state';
  return { kind, display, errorCode };
}

/** The display line; a failure's error code is added when the display does not name it already. */
export function displayLine(result: unknown): string {
  const { kind, display, errorCode } = readResult(result);
  if (kind !== 'failed' || !errorCode || display.includes(errorCode)) return display;
  return display ? `${display} [${errorCode}]` : errorCode;
}

/** Why a blocked call was refused: its display without the `[Blocked]` mark. */
export function blockedReason(result: unknown): string {
  return readResult(result).display.replace(/^\[Blocked\]\s*/, '');
}
