/**
 * The tools a run can offer to the model.
 *
 * Tools are registered in code (`register`), each with a JSON schema of its
 * arguments. The registry decides which tools a run offers (its allow-list
 * rules, behaviour.md §8) and checks a call's arguments against the schema
 * before the tool runs, so a tool's `execute` only ever sees arguments its
 * schema accepts.
 */

import Ajv, { type ValidateFunction } from 'ajv';
import type { ToolDefinition } from '../../providers/adapters/types';
import { groupOf } from './tool-switches';

/** What a running tool gets besides its arguments. */
export interface ToolExecutionContext {
  /** Fires when the run is cancelled; a long tool should stop early. */
  signal: AbortSignal;
  /**
   * Calls to external tools the run has made so far, counted from its stored
   * steps (so a run resumed after approval or taken over after a crash goes
   * on with its count). Absent outside a run's loop.
   */
  remoteCallsMade?: number;
  /** An external tool calls this once it contacts its server: the TOOL step is marked as a remote call. */
  countRemoteCall?(): void;
}

/** A tool as registered in code. */
export interface ToolRegistration {
  /** The name the model calls it by: `a-z`, `0-9`, `_`, `-`, at most 64 characters. */
  name: string;
  /** What the tool does, for the model. */
  description: string;
  /** JSON schema of the arguments object. */
  parameters: Record<string, unknown>;
  /** Offered when a run names no allow-list. */
  enabledByDefault: boolean;
  /**
   * The group TYPO3's group switches and a configuration's
   * `allowed_tool_groups` name: `promptwire` for the built-ins (the default),
   * `mcp_<server>` for an MCP server's tools (as nr_llm groups them).
   */
  group?: string;
  /** A person must approve each call before it runs (an MCP server's tools, unless its operator said otherwise). */
  requiresApproval?: boolean;
  /**
   * Running it twice with the same arguments does no harm (it only reads).
   * A run taken over after a crash runs such a call again; any other call
   * whose result was not stored ends the run `interrupted`.
   */
  idempotent?: boolean;
  /**
   * Runs the tool with schema-valid arguments and answers the text the model
   * reads. Throwing `ToolInputError` gives the model that error's message;
   * any other exception gives it only `Error: tool "NAME" failed.` (the
   * exception is logged, never sent).
   */
  execute(args: Record<string, unknown>, context: ToolExecutionContext): Promise<string>;
}

/** A tool as listed to clients (the `tools` query): everything but the code. */
export interface ToolInfo {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  enabledByDefault: boolean;
  requiresApproval: boolean;
  group: string;
}

/**
 * An error a tool reports to the model on purpose: its message is written for
 * the model and sent as `Error: MESSAGE`. Use it for "not found" and similar
 * answers; never put internal details in it.
 */
export class ToolInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ToolInputError';
  }
}

/** A tool from outside the code (an MCP server's), with the argument check its source compiled. */
export interface ExternalTool {
  registration: ToolRegistration;
  validate: ValidateFunction;
}

/**
 * Where a run finds tools beyond the built-ins. Read for each run that names
 * one, because administrators change them at any time.
 */
export interface ExternalToolSource {
  /** The tools, built for one run (per-run limits live in their `execute`). */
  toolsForRun(): Promise<ExternalTool[]>;
  /** The same tools, as the `tools` query lists them. */
  list(): Promise<ToolInfo[]>;
}

export type ArgumentCheck = { ok: true; args: Record<string, unknown> } | { ok: false; message: string };

const TOOL_NAME_PATTERN = /^[a-z0-9_-]{1,64}$/;
/** What the function-calling APIs accept; remote tool names may use upper case. */
const EXTERNAL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

interface RegisteredTool {
  registration: ToolRegistration;
  validate: ValidateFunction;
}

export class ToolRegistry {
  private readonly tools = new Map<string, RegisteredTool>();
  private readonly ajv = new Ajv({ allErrors: true, strictSchema: true, strictTypes: false, strictTuples: false });

  /**
   * Adds a tool. Throws on a malformed name, a name already registered, or a
   * schema ajv cannot compile: these are programming errors, found at start.
   */
  register(tool: ToolRegistration): void {
    if (!TOOL_NAME_PATTERN.test(tool.name)) {
      throw new Error(`Tool name "${tool.name}" must be 1 to 64 characters of a-z, 0-9, _ and -.`);
    }
    if (this.tools.has(tool.name)) {
      throw new Error(`A tool named "${tool.name}" is already registered.`);
    }
    const validate = this.ajv.compile(tool.parameters);
    this.tools.set(tool.name, { registration: tool, validate });
  }

  /**
   * This registry plus external tools, for one run. A name a registered tool
   * already has keeps the registered tool (built-ins win); the external one
   * is dropped.
   */
  withExternal(external: readonly ExternalTool[]): ToolRegistry {
    if (external.length === 0) return this;
    const registry = new ToolRegistry();
    for (const [name, tool] of this.tools) registry.tools.set(name, tool);
    for (const tool of external) {
      if (!registry.tools.has(tool.registration.name) && EXTERNAL_NAME_PATTERN.test(tool.registration.name)) {
        registry.tools.set(tool.registration.name, tool);
      }
    }
    return registry;
  }

  has(name: string): boolean {
    return this.tools.has(name);
  }

  get(name: string): ToolRegistration | undefined {
    return this.tools.get(name)?.registration;
  }

  /** Every registered tool, in registration order. */
  list(): ToolInfo[] {
    return [...this.tools.values()].map(({ registration }) => ({
      name: registration.name,
      description: registration.description,
      parameters: registration.parameters,
      enabledByDefault: registration.enabledByDefault,
      requiresApproval: registration.requiresApproval === true,
      group: groupOf(registration),
    }));
  }

  /** This registry with only the tools `keep` accepts (the switched-on ones, for one run). */
  filtered(keep: (tool: ToolRegistration) => boolean): ToolRegistry {
    const registry = new ToolRegistry();
    for (const [name, tool] of this.tools) if (keep(tool.registration)) registry.tools.set(name, tool);
    return registry;
  }

  /**
   * The names of an allow-list that name no registered tool, each once, in
   * the order given. A caller reports them as an input error before starting
   * a run. An absent allow-list has none.
   */
  unknownNames(allowList: readonly string[] | null | undefined): string[] {
    if (allowList === null || allowList === undefined) {
      return [];
    }
    return [...new Set(allowList.filter((name) => !this.tools.has(name)))];
  }

  /**
   * The tools a run offers, in registration order: an absent allow-list
   * offers the tools enabled by default; `[]` offers none; a list offers the
   * registered tools it names (enabled by default or not; unknown names are
   * ignored here — see `unknownNames`).
   */
  resolveOffered(allowList: readonly string[] | null | undefined): ToolRegistration[] {
    const all = [...this.tools.values()].map(({ registration }) => registration);
    if (allowList === null || allowList === undefined) {
      return all.filter((tool) => tool.enabledByDefault);
    }
    const allowed = new Set(allowList);
    return all.filter((tool) => allowed.has(tool.name));
  }

  /**
   * Checks a call's arguments (already parsed from JSON) against the tool's
   * schema. The arguments must be a JSON object. The message says what is
   * wrong, in ajv's words, e.g. `arguments must have required property 'expression'`.
   */
  validateArguments(name: string, args: unknown): ArgumentCheck {
    const tool = this.tools.get(name);
    if (tool === undefined) {
      return { ok: false, message: `no tool named "${name}"` };
    }
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      return { ok: false, message: 'arguments must be a JSON object' };
    }
    if (!tool.validate(args)) {
      return { ok: false, message: this.ajv.errorsText(tool.validate.errors, { dataVar: 'arguments' }) };
    }
    return { ok: true, args: args as Record<string, unknown> };
  }
}

/** The definition sent to the provider for a tool. */
export function toToolDefinition(tool: ToolRegistration): ToolDefinition {
  return { name: tool.name, description: tool.description, parameters: tool.parameters };
}

/** An empty registry; register the built-ins with `createBuiltinTools`. */
export function createToolRegistry(tools: readonly ToolRegistration[] = []): ToolRegistry {
  const registry = new ToolRegistry();
  for (const tool of tools) {
    registry.register(tool);
  }
  return registry;
}
