// eslint-disable-next-line no-restricted-imports -- reads conch's own package.json
import { readFileSync } from 'node:fs';
import { type ExecuteOptions, type Logger, NoSuchToolError, type PluginRegistry } from '@conch/core';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { clientSupportsElicitation, elicitationApprover } from './elicitation-approver.js';
import { ProgressRelay } from './progress-relay.js';
import { type DenialConfigFile, errorToCallToolResult, toCallToolResult } from './to-call-tool-result.js';

export interface ConchMcpServerOptions {
  /** Server name reported at initialize. Default 'conch'. */
  name?: string;
  /** Server version reported at initialize. Default: this package's version. */
  version?: string;
  /** Keep-alive progress interval for calls that carry a progressToken; 0 disables. Default 10,000 ms. */
  progressIntervalMs?: number;
  /** How long an approval question waits for the human before it counts as deny. Default 10 min. */
  elicitationTimeoutMs?: number;
  /**
   * The config file this server's permission rules come from, named in denials (what to set or
   * remove there); `exists: false` when the server runs on a built-in default and the file is the
   * one to create. Default `{ path: 'conch.config.json', exists: true }`.
   */
  configFile?: DenialConfigFile;
  /**
   * Replaces the sentence appended to a denial an allow rule would lift (where that rule goes for
   * this server). Default: said from `configFile`.
   */
  configHint?: string;
  /** Default: the registry's logger (child `{ plugin: 'mcp' }`). */
  logger?: Logger;
  /**
   * The largest tool answer sent (bytes of JSON); a larger result has its longest strings cut in
   * the middle to fit, saying so. Default 4 MiB (DEFAULT_MAX_ANSWER_BYTES), under the 10 MB an
   * MCP SDK client reads in one message.
   */
  maxAnswerBytes?: number;
}

export const DEFAULT_PROGRESS_INTERVAL_MS = 10_000;
export const DEFAULT_ELICITATION_TIMEOUT_MS = 10 * 60_000;

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/**
 * An MCP server (low-level SDK `Server`, not yet connected) exposing the registry's tools: each
 * exposed tool is an MCP tool with its JSON Schema and annotations; calls run through
 * `registry.execute` with the request's cancellation signal, progress relayed when the client
 * sent a progressToken, and asks answered through elicitation when the client supports it.
 * The host owns the registry: closing the server does not dispose it.
 */
export function createConchMcpServer(registry: PluginRegistry, options: ConchMcpServerOptions = {}): Server {
  const logger = options.logger ?? registry.logger.child({ plugin: 'mcp' });
  const progressIntervalMs = options.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS;
  const elicitationTimeoutMs = options.elicitationTimeoutMs ?? DEFAULT_ELICITATION_TIMEOUT_MS;
  const denialOptions = {
    ...(options.configFile ? { configFile: options.configFile } : {}),
    ...(options.configHint ? { configHint: options.configHint } : {}),
    ...(options.maxAnswerBytes ? { maxAnswerBytes: options.maxAnswerBytes } : {}),
  };
  const instructions = registry.systemInstructions();

  const server = new Server(
    { name: options.name ?? 'conch', version: options.version ?? packageVersion() },
    {
      capabilities: { tools: { listChanged: false } },
      ...(instructions ? { instructions } : {}),
      jsonSchemaValidator: lazyAjv(),
    },
  );

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: registry.tools().map((info): Tool => ({
      name: info.name,
      description: info.description,
      inputSchema: info.inputSchema as Tool['inputSchema'],
      annotations: { ...info.annotations },
    })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name } = request.params;
    if (!registry.tools().some((t) => t.name === name)) {
      // (A name past 64 characters is named by its start: see NoSuchToolError.)
      throw new McpError(
        ErrorCode.InvalidParams,
        new NoSuchToolError(
          name,
          registry
            .tools()
            .map((t) => t.name)
            .sort(),
        ).message,
      );
    }
    const progressToken = extra._meta?.progressToken;
    const relay =
      progressToken === undefined
        ? undefined
        : new ProgressRelay((notification) => {
            extra
              .sendNotification({
                method: 'notifications/progress',
                params: { progressToken, ...notification },
              })
              .catch((error: unknown) =>
                logger.debug({ err: String(error) }, 'progress notification failed'),
              );
          }, progressIntervalMs);
    const executeOptions: ExecuteOptions = {
      signal: extra.signal,
      callId: `mcp-${String(extra.requestId)}`,
      ...(relay ? { onProgress: (progress) => relay.report(progress) } : {}),
      ...(clientSupportsElicitation(server)
        ? {
            approve: elicitationApprover(server, {
              relatedRequestId: extra.requestId,
              timeoutMs: elicitationTimeoutMs,
              logger,
            }),
          }
        : {}),
    };
    try {
      const result = await registry.execute(name, request.params.arguments ?? {}, executeOptions);
      return toCallToolResult(result, denialOptions);
    } catch (error) {
      // A cancelled request gets no response (the SDK drops it); still say so in the log.
      if (extra.signal.aborted)
        logger.info({ tool: name, requestId: extra.requestId }, 'tool call cancelled');
      return errorToCallToolResult(error);
    } finally {
      relay?.close();
    }
  });

  return server;
}

/**
 * The SDK's Ajv validator, made when the server first checks a client's answer to an elicitation
 * (an approval) against its schema. The SDK's Server makes one in its constructor: Ajv compiling
 * its meta-schemas was ~10 ms of every conch-mcp start on the 2-core VM, for a session that may
 * never ask.
 */
function lazyAjv(): jsonSchemaValidator {
  let ajv: AjvJsonSchemaValidator | undefined;
  return {
    getValidator(schema) {
      ajv ??= new AjvJsonSchemaValidator();
      return ajv.getValidator(schema);
    },
  };
}
