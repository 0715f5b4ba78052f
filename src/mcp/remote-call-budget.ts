/**
 * How many calls to external tools one run may make (nr_llm's rule). A call
 * is charged after the permission and argument checks and before it runs, so
 * a refused call costs nothing and a made one is counted once, whether it
 * then succeeds or fails.
 */

export const REMOTE_CALLS_PER_RUN = 20;

export function budgetExhaustedMessage(limit: number, toolName: string): string {
  return `Error: this run has used its budget of ${limit} calls to external tools; "${toolName}" was not called.`;
}

export class RemoteCallBudget {
  private used: number;

  constructor(
    readonly limit = REMOTE_CALLS_PER_RUN,
    alreadyUsed = 0,
  ) {
    this.used = alreadyUsed;
  }

  /** Charges one call; false when the budget is spent (nothing is charged then). */
  tryConsume(): boolean {
    if (this.used >= this.limit) return false;
    this.used += 1;
    return true;
  }

  get callsMade(): number {
    return this.used;
  }
}
