declare module '@conch/core' {
  interface ConchEvents {
    /** Every decision of the gate (also kept in the audit log). */
    'permission.decision': {
      tool: string;
      command?: string;
      outcome: 'allow' | 'deny';
      askedHuman: boolean;
      rule?: string;
      /** Where an allowed command runs ('workspace-write', 'read-only' or 'outside'). */
      sandbox?: 'workspace-write' | 'read-only' | 'outside';
      reason: string;
    };
  }
}

export {};
