/**
 * The flags every local Chromium conch starts gets. The machine conch usually runs on has a closed
 * network: without the background-networking, component-update, sync and QUIC flags Chromium keeps
 * trying to reach Google services and floods it with retries. `--no-sandbox`: Chromium's own
 * sandbox needs user namespaces or a setuid helper that containers and CI runners often lack (the
 * page still runs in a fresh profile, and the browser only reaches what the host lets it).
 */
export const CHROME_FLAGS: readonly string[] = Object.freeze([
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
  '--mute-audio',
]);

/**
 * The full argument list: the flags above, a private profile, and remote debugging on 127.0.0.1
 * at port 0 — the kernel picks a free port and Chromium writes it to the profile's
 * `DevToolsActivePort` file, so two browsers never race for a port chosen in advance.
 */
export function chromeArgs(profileDir: string, extraArgs: readonly string[] = []): string[] {
  return [
    ...CHROME_FLAGS,
    `--user-data-dir=${profileDir}`,
    '--remote-debugging-port=0',
    '--remote-debugging-address=127.0.0.1',
    ...extraArgs,
    'about:blank',
  ];
}

/** How the browser's row reads in process lists (`!ps`, the demo's process panel). */
export const BROWSER_LABEL = '[browser] Chrome Headless';

export function readyLabel(wsUrl: string): string {
  return `${BROWSER_LABEL}  CDP Ready ${wsUrl}`;
}
