declare module '@conch/core' {
  interface ConchEvents {
    /** Every decision of the gate (also kept in the audit log). */
    'permission.decision': {
      tool: string;
      command?: string;
      outcome: 'allow' | 'deny';
      askedHuman: boolean;
      rule?: string;
      reason: string;
    };
  }
}

export {};
