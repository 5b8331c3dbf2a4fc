import { z } from 'zod';
import { isCdpUrl } from './cdp-endpoint.js';
import { compileUrlPattern, DEFAULT_ALLOWED_URLS } from './url-allowlist.js';

/**
 * The browser plugin's config (`registry.expose('browser', config)`; seed spellings such as
 * `cdp_url` work too). `cdpUrl` picks the mode: 'auto' starts a private headless Chromium, a
 * ws:// or http:// URL uses a browser that is already running, null (the default) means no
 * browser and no browser tools.
 */
export const browserConfigSchema = z.strictObject({
  cdpUrl: z
    .union([
      z.literal('auto'),
      z.null(),
      z
        .string()
        .refine(
          isCdpUrl,
          "'auto', null, or a ws://, wss://, http:// or https:// URL of a browser's DevTools endpoint",
        ),
    ])
    .default(null)
    .describe(
      "'auto': start a local headless Chromium; a ws:// or http:// URL: an external browser; null: no browser",
    ),
  executablePath: z
    .string()
    .min(1)
    .optional()
    .describe("the Chrome/Chromium for 'auto' (default: CHROME_PATH, else chromium / google-chrome on PATH)"),
  startTimeoutMs: z
    .number()
    .int()
    .min(1000)
    .default(30_000)
    .describe("how long a local browser may take to answer CDP ('auto')"),
  extraArgs: z.array(z.string().min(1)).default([]).describe("Chromium flags added to conch's own ('auto')"),
  connectTimeoutMs: z
    .number()
    .int()
    .min(100)
    .default(10_000)
    .describe('how long probing or connecting to the DevTools endpoint may take'),
  allowedUrls: z
    .array(
      z.string().superRefine((value, ctx) => {
        try {
          compileUrlPattern(value);
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: (error as Error).message });
        }
      }),
    )
    .default([...DEFAULT_ALLOWED_URLS])
    .describe('URL patterns the model may open without asking (others ask through the permission gate)'),
  screenshotDir: z
    .string()
    .min(1)
    .optional()
    .describe(
      "where browser_screenshot saves PNGs, relative to the working dir (default: the registry's temp dir)",
    ),
  evaluate: z
    .enum(['ask', 'allow', 'off'])
    .default('ask')
    .describe(
      "browser_evaluate: 'ask' each time (default), 'allow' without asking, 'off' to leave the tool out",
    ),
  navigationTimeoutMs: z.number().int().min(100).default(30_000).describe('timeout of one navigation'),
  viewport: z
    .strictObject({ width: z.number().int().min(100).max(8192), height: z.number().int().min(100).max(8192) })
    .default({ width: 1280, height: 800 })
    .describe('page size of the tools’ browser context'),
  maxSnapshotChars: z
    .number()
    .int()
    .min(200)
    .default(20_000)
    .describe('characters of a page snapshot or evaluation result returned to the model'),
});

export type BrowserConfig = z.output<typeof browserConfigSchema>;
export type BrowserConfigInput = z.input<typeof browserConfigSchema>;
