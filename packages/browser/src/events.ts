declare module '@conch/core' {
  interface ConchEvents {
    /** The browser answers CDP: a local one started ('auto') or an external one was reached. */
    'browser.ready': {
      mode: 'auto' | 'external';
      cdpUrl: string;
      /** The local browser's process id in the process manager, and its pid ('auto'). */
      processId?: string;
      pid?: number;
    };
    /** The browser was stopped ('auto') or disconnected from ('external'). */
    'browser.closed': { mode: 'auto' | 'external'; cdpUrl: string };
    /**
     * A request of the tools' pages (or a connection of their context) was refused: its URL is not
     * in `allowedUrls`. It never left the browser.
     */
    'browser.blocked': {
      /** The URL refused; `host:port` for a connection (a WebSocket) the context's proxy refused. */
      url: string;
      /** CDP's resource type (Document, Script, Image, Stylesheet, XHR, Fetch, Other …) or 'Connection'. */
      resourceType: string;
      /** A navigation of a tab's main frame: the tab shows an error page instead. */
      mainFrame: boolean;
      /** A redirect hop (HTTP 3xx) of a request that was allowed. */
      redirect: boolean;
      reason: string;
    };
  }
}

export {};
