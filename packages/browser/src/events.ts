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
  }
}

export {};
