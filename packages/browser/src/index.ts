import './events.js';

export { browserPlugin, browserPlugin as default } from './plugin.js';
export { browserConfigSchema, type BrowserConfig, type BrowserConfigInput } from './config.js';
export {
  BROWSER_SERVICE,
  createBrowserService,
  type BrowserMode,
  type BrowserService,
  type BrowserStatus,
} from './browser-service.js';
export { launchChrome, type ChromeInstance, type LaunchChromeOptions } from './launch-chrome.js';
export { probeCdp, parseCdpUrl, isCdpUrl, type CdpEndpoint } from './cdp-endpoint.js';
export { findChrome, CHROME_NAMES } from './find-chrome.js';
export { CHROME_FLAGS, chromeArgs, BROWSER_LABEL, readyLabel } from './chrome-flags.js';
export { UrlAllowlist, compileUrlPattern, DEFAULT_ALLOWED_URLS, type UrlPattern } from './url-allowlist.js';
export { browserTools, browserInstructions, normalizeUrl } from './tools.js';
export { PageSession, type PageSessionOptions, type PageRequests } from './page-session.js';
export { RequestPolicy, type RequestVerdict } from './request-policy.js';
export { RequestGuard, type BlockedRequest, type RequestGuardOptions } from './request-guard.js';
export { pngSize } from './png-size.js';
export { BrowserNotFoundError } from './errors/browser-not-found-error.js';
export { BrowserStartError } from './errors/browser-start-error.js';
export { CdpUnreachableError } from './errors/cdp-unreachable-error.js';
export { InvalidBrowserOptionError } from './errors/invalid-browser-option-error.js';
