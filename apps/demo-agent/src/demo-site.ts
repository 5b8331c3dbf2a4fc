import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { shellQuote } from '@conch/shell-syntax';

/** The page the walkthrough serves and opens in the browser (shipped with the app in `site/`). */
export const SITE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'site');

/**
 * The walkthrough's static server: python's http.server on a free loopback port (it prints the
 * port, unbuffered), serving the demo page only. The demo config allows exactly this command.
 */
export function serveCommand(siteDir: string = SITE_DIR): string {
  return `python3 -u -m http.server 0 --bind 127.0.0.1 --directory ${shellQuote(siteDir)}`;
}

/** The start of the line http.server prints once it listens: the walkthrough's `wait_for`. */
export const SERVER_READY = 'Serving HTTP on';

/** The port http.server announced ("Serving HTTP on 127.0.0.1 port 41235 …"), if it did. */
export function announcedPort(output: string): number | undefined {
  const match = /Serving HTTP on \S+ port (\d+)/.exec(output);
  return match ? Number(match[1]) : undefined;
}
