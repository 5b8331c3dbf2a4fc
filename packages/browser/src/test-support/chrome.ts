// Browser suites skip without a Chrome/Chromium on a developer machine and fail without one under CI.
import { requireUnderCi } from '@conch/test-support';
import { findChrome } from '../find-chrome.js';

function installed(): boolean {
  try {
    findChrome();
    return true;
  } catch {
    return false;
  }
}

/** True when the browser tests can run; throws under CI when they cannot. */
export const requireChrome = (): boolean =>
  requireUnderCi(installed(), 'Chromium', 'apt-get install -y chromium (or set CHROME_PATH)');
