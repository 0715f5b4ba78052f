/**
 * MCP servers: registering them, their write-only credential, importing
 * their catalogues, and what a connection to one needs.
 */
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import Ajv from 'ajv';
import type { IdentifierLock } from '../db/identifier-lock';
import { assertIdentifierAvailable } from '../db/record-rules';
import type { Logger } from '../logger';
import { checkEnvReference, type CredentialEnvironment, ENV_REFERENCE_RULE, isEnvReference, readEnvReference } from '../shared/env-reference';
import { BadUserInputError, NotFoundError } from '../shared/errors';
import { checkOutboundUrl, OutboundAddressRefusedError } from '../shared/outbound-address';
import { SecretBox } from '../shared/secret-box';
import { unixNow } from '../shared/time';
import { MalformedAnswerError, withoutCredential, type McpClient, type McpEndpoint } from './mcp-client';
import { McpServerEntity } from './mcp-server.entity';
import type { McpToolEntity } from './mcp-tool.entity';
import type { CatalogueEntry, McpRepository } from './mcp.repository';
import { normaliseInputSchema } from './schema-normaliser';
import { localToolName, SERVER_IDENTIFIER_PATTERN } from './tool-names';

/** What an administrator sends; `undefined` leaves a field as it is. */
export interface McpServerWrite {
  identifier?: string | null;
  name?: string | null;
  description?: string | null;
  url?: string | null;
  /** Write-only. `null` or `""` removes it; `env:NAME` reads NAME at connection time (NAME on the provider-key allow-list). */
  credential?: string | null;
  authPlacement?: string | null;
  authHeaderName?: string | null;
  dataClass?: string | null;
  requiresApproval?: boolean | null;
  enabled?: boolean | null;
}

export type CredentialState = 'none' | 'stored' | 'environment' | 'external';

/** `auth_credential` of a server whose credential this service stores (encrypted, in its own table). */
const STORED_MARKER = 'promptwire:stored';

export function credentialState(authCredential: string): CredentialState {
  if (authCredential === '') return 'none';
  if (authCredential === STORED_MARKER) return 'stored';
  if (isEnvReference(authCredential)) return 'environment';
  // TYPO3 keeps an identifier of its vault here, which this service cannot read.
  return 'external';
}

/** A tool an import left out, and why (for the operator). */
export interface SkippedTool {
  /** As the server advertised it; a name that is not a string as its JSON text, none as `''`; cut to 100 characters. */
  name: string;
  reason: string;
}

/** What an import did: the server row as it is now, and the tools it left out. */
export interface ImportOutcome {
  server: McpServerEntity;
  skippedTools: SkippedTool[];
}

/** A skipped tool as a line of `import_error`. */
export function skippedToolLine(skipped: SkippedTool): string {
  return skipped.name === '' ? `A tool was skipped: ${skipped.reason}.` : `"${skipped.name}" was skipped: ${skipped.reason}.`;
}

/** A name as the server gave it, for the skipped list: bounded, and readable whatever its type. */
function advertisedName(name: unknown): string {
  const text = typeof name === 'string' ? name : name === undefined ? '' : (JSON.stringify(name) ?? String(name));
  return text.length <= 100 ? text : `${text.slice(0, 99)}…`;
}

/** A server's catalogue listing more tools than this is refused (nr_llm's bound). */
const MAX_TOOLS = 500;

/** Headers the transport itself sets; a credential may not replace them. */
const RESERVED_HEADERS = new Set(['host', 'content-type', 'content-length', 'accept', 'connection', 'transfer-encoding', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id']);

export interface McpServiceOptions {
  allowedHosts: readonly string[];
  /** Names of the built-in tools: an imported tool of the same name is skipped (built-ins win). */
  builtinToolNames: () => readonly string[];
  /** Reads `env:NAME` credentials, under the allow-list provider keys use. */
  environment: CredentialEnvironment;
  timeoutMs: number;
  /** Closes the kept connections (at shutdown). */
  close?: () => Promise<void>;
}

export class McpService {
  /** Compiles remote argument schemas: lenient about keywords and formats a remote server may use. */
  readonly schemaCompiler = new Ajv({ strict: false, validateFormats: false, allErrors: true });
  private readonly contactWritten = new Map<number, number>();

  constructor(
    private readonly repository: McpRepository,
    private readonly client: McpClient,
    private readonly secrets: SecretBox,
    /** Every write that sets an identifier runs under it: one check-then-write at a time, across instances. */
    private readonly identifiers: IdentifierLock,
    private readonly logger: Logger,
    private readonly options: McpServiceOptions,
  ) {}

  async list(): Promise<McpServerEntity[]> {
    return this.repository.listServers();
  }

  async catalogueOf(serverUids: readonly number[]): Promise<McpToolEntity[]> {
    return this.repository.catalogueOf(serverUids);
  }

  async create(input: McpServerWrite): Promise<McpServerEntity> {
    return this.identifiers.transaction('tx_nrllm_mcp_server', async (manager) => {
      const now = unixNow();
      const row = Object.assign(new McpServerEntity(), {
        pid: 0,
        identifier: '',
        name: '',
        description: null,
        url: '',
        authCredential: '',
        authPlacement: 'bearer',
        authHeaderName: '',
        dataClass: '',
        requiresApproval: true,
        enabled: false,
        importStatus: 'never_imported',
        importError: null,
        lastImported: 0,
        toolCount: 0,
        lastContact: 0,
        lastLatencyMs: 0,
        tstamp: now,
        crdate: now,
        deleted: false,
        hidden: false,
      });
      const credential = this.applyWrite(row, input, true);
      await assertIdentifierAvailable(manager, McpServerEntity, row.identifier, null, 'MCP server');
      const saved = await this.repository.saveServer(row, manager);
      if (credential !== undefined) await this.writeCredential(saved, credential, now, manager);
      return saved;
    });
  }

  async update(uid: number, input: McpServerWrite): Promise<McpServerEntity> {
    const saved = await this.identifiers.transaction('tx_nrllm_mcp_server', async (manager) => {
      const row = await this.repository.findServer(uid, manager);
      if (!row) throw new NotFoundError(`No MCP server with uid ${uid}`, 'uid');
      const previousIdentifier = row.identifier;
      const credential = this.applyWrite(row, input, false);
      if (row.identifier !== previousIdentifier) {
        await assertIdentifierAvailable(manager, McpServerEntity, row.identifier, uid, 'MCP server');
        // The imported names carry the identifier; they are re-made by the next import.
        await this.repository.reconcileCatalogue(row, [], unixNow(), manager);
        Object.assign(row, { importStatus: 'never_imported', importError: null, toolCount: 0 });
      }
      row.tstamp = unixNow();
      const stored = await this.repository.saveServer(row, manager);
      if (credential !== undefined) await this.writeCredential(stored, credential, row.tstamp, manager);
      return stored;
    });
    this.client.forget(uid);
    return saved;
  }

  async delete(uid: number): Promise<boolean> {
    await this.repository.transaction(async (manager) => {
      if (!(await this.repository.findServer(uid, manager))) throw new NotFoundError(`No MCP server with uid ${uid}`, 'uid');
      await this.repository.deleteServer(uid, unixNow(), manager);
    });
    this.client.forget(uid);
    return true;
  }

  /**
   * Connects, lists the server's tools and stores the catalogue. A server
   * that cannot be reached leaves the catalogue as it was (it has not said
   * its tools are gone) and records `import_status = error`. A tool this
   * service cannot take (no usable name, an argument schema it cannot carry)
   * is skipped, the rest imported: `import_status = partial`, and the
   * skipped tools with their reasons in `import_error`, the log and the answer.
   */
  async importTools(uid: number): Promise<ImportOutcome> {
    const server = await this.repository.findServer(uid);
    if (!server) throw new NotFoundError(`No MCP server with uid ${uid}`, 'uid');
    const now = unixNow();
    const refuse = async (reason: string): Promise<ImportOutcome> => {
      await this.repository.recordImportOutcome(uid, { status: 'error', error: reason, toolCount: server.toolCount, now });
      return { server: (await this.repository.findServer(uid))!, skippedTools: [] };
    };

    const twins = (await this.repository.serversWithIdentifier(server.identifier)).filter((other) => other.uid !== uid);
    if (twins.length > 0) {
      return refuse(`The identifier "${server.identifier}" is also used by server "${twins[0]!.name}"; identifiers must be unique because they name the imported tools.`);
    }
    const endpoint = await this.endpointFor(server);
    if (typeof endpoint === 'string') return refuse(endpoint);

    let advertised: unknown[];
    try {
      advertised = await this.client.listTools(endpoint);
    } catch (error) {
      this.logger.warn({ server: server.identifier, err: error }, 'An MCP catalogue import failed');
      return refuse(this.describeFailure(error));
    }
    if (advertised.length > MAX_TOOLS) {
      return refuse(`The server advertises ${advertised.length} tools, more than the ${MAX_TOOLS} this service imports.`);
    }

    const accepted: CatalogueEntry[] = [];
    const skipped: SkippedTool[] = [];
    for (const entry of advertised) {
      const outcome = this.accept(server, entry, accepted);
      if ('reason' in outcome) {
        // Names come from the server, which may repeat the credential it was sent anywhere.
        skipped.push({ name: withoutCredential(outcome.name, endpoint.credential), reason: withoutCredential(outcome.reason, endpoint.credential) });
      } else {
        accepted.push(outcome);
      }
    }
    if (skipped.length > 0) this.logger.warn({ server: server.identifier, skipped }, 'An MCP catalogue import skipped tools');
    try {
      await this.repository.transaction(async (manager) => {
        await this.repository.reconcileCatalogue(server, accepted, now, manager);
        const outcome = { status: skipped.length === 0 ? 'ok' : 'partial', error: skipped.map(skippedToolLine).join('\n'), toolCount: accepted.length, now };
        await this.repository.recordImportOutcome(uid, outcome, manager);
      });
    } catch (error) {
      // The likely cause: another server (e.g. one TYPO3 deleted without its catalogue) holds one of the names.
      this.logger.error({ server: server.identifier, err: error }, 'Storing an MCP catalogue failed');
      return refuse('The catalogue could not be stored: a tool name is already used by another server\'s catalogue.');
    }
    return { server: (await this.repository.findServer(uid))!, skippedTools: skipped };
  }

  /**
   * Where and how to connect, or why the server cannot be used (a message
   * for the operator; it never contains the credential).
   */
  async endpointFor(server: McpServerEntity): Promise<McpEndpoint | string> {
    if (server.url === '') return 'The server has no URL.';
    const headers: Record<string, string> = {};
    const resolved = await this.resolveCredential(server);
    if ('unusable' in resolved) return resolved.unusable;
    const credential = resolved.credential;
    if (credential !== '') {
      if (server.authPlacement === 'header' && server.authHeaderName !== '') headers[server.authHeaderName] = credential;
      else headers.authorization = `Bearer ${credential}`;
    }
    return { uid: server.uid, url: server.url, headers, credential };
  }

  async close(): Promise<void> {
    await this.options.close?.();
  }

  /**
   * nr_llm's liveness fields after a successful round trip. `last_contact`
   * has a resolution of one second, so it is written at most once a second
   * per server: a run making 20 calls does not make 20 writes.
   */
  async recordContact(serverUid: number, latencyMs: number): Promise<void> {
    const now = unixNow();
    if (this.contactWritten.get(serverUid) === now) return;
    this.contactWritten.set(serverUid, now);
    await this.repository.recordContact(serverUid, now, latencyMs);
  }

  /** The credential to send (`''`: none), or why the one set cannot be used here (a message for the operator). */
  private async resolveCredential(server: McpServerEntity): Promise<{ credential: string } | { unusable: string }> {
    const vault = { unusable: 'The credential is a TYPO3 vault identifier, which this service cannot read; set the credential here.' };
    switch (credentialState(server.authCredential)) {
      case 'none':
        return { credential: '' };
      case 'external':
        return vault;
      case 'environment': {
        // A row written by TYPO3, or before the allow-list, may name any variable: such a variable is never read.
        const read = readEnvReference(server.authCredential, this.options.environment);
        if (read.ok) return { credential: read.value };
        if (read.reason === 'unset') return { credential: '' };
        return { unusable: `The credential "${server.authCredential}" names a variable this service does not read: "env:NAME" ${ENV_REFERENCE_RULE}; set the credential here.` };
      }
      case 'stored': {
        const stored = await this.repository.credentialOf(server.uid);
        const decrypted = stored === null ? null : this.secrets.decrypt(stored);
        return decrypted === null ? { unusable: 'The stored credential cannot be read (it was encrypted with another SECRET_KEY, or is missing); set the credential again.' } : { credential: decrypted };
      }
    }
  }

  /** The catalogue entry an advertised tool makes, or why it is skipped. */
  private accept(server: McpServerEntity, entry: unknown, accepted: readonly CatalogueEntry[]): CatalogueEntry | SkippedTool {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return { name: '', reason: 'the entry is not a tool (an object)' };
    const tool = entry as Record<string, unknown>;
    const remoteName = tool.name;
    const skip = (reason: string): SkippedTool => ({ name: advertisedName(remoteName), reason });
    if (remoteName === undefined || remoteName === null || remoteName === '') return { name: '', reason: 'it has no name' };
    if (typeof remoteName !== 'string') return skip('its name is not a string');
    const toolName = localToolName(server.identifier, remoteName);
    if (toolName === null) return skip(`it cannot be given a valid local tool name ("mcp_${server.identifier}_" and its name: at most 64 characters of a-z, A-Z, 0-9, "_" and "-")`);
    if (accepted.some((other) => other.toolName === toolName)) return skip('it maps to a name this server already used');
    if (this.options.builtinToolNames().includes(toolName)) return skip('it would collide with a built-in tool of the same name');
    const schema = normaliseInputSchema(tool.inputSchema);
    if (!schema.ok) return skip(schema.reason);
    try {
      this.schemaCompiler.compile(schema.schema);
    } catch {
      return skip('its parameter schema is not a valid JSON schema');
    }
    const annotations = tool.annotations;
    return {
      toolName,
      remoteName,
      description: typeof tool.description === 'string' ? tool.description : '',
      inputSchema: JSON.stringify(schema.schema),
      remoteAnnotations: typeof annotations === 'object' && annotations !== null ? JSON.stringify(annotations) : '',
    };
  }

  /** An import failure in words for the operator; the details are in the log. */
  private describeFailure(error: unknown): string {
    const refused = findCause(error, OutboundAddressRefusedError);
    if (refused) return `The server address was refused: ${refused.message}`;
    if (error instanceof MalformedAnswerError) return error.message;
    if (error instanceof StreamableHTTPError && error.code !== undefined) return `The server answered HTTP ${error.code}.`;
    if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) return `The server did not answer within ${this.options.timeoutMs} ms.`;
    if (error instanceof McpError) return `The server answered with an MCP error (${error.code}).`;
    return 'The server could not be reached.';
  }

  private async writeCredential(row: McpServerEntity, credential: string | null, now: number, manager: Parameters<McpRepository['storeCredential']>[3]): Promise<void> {
    await this.repository.storeCredential(row.uid, credential === null ? null : this.secrets.encrypt(credential), now, manager);
  }

  /**
   * Validates and applies a write to the row. Answers the credential to
   * store encrypted (`null` = remove it; `undefined` = leave it), having set
   * the row's `auth_credential` marker accordingly.
   */
  private applyWrite(row: McpServerEntity, input: McpServerWrite, creating: boolean): string | null | undefined {
    if (creating || input.identifier !== undefined) {
      const identifier = (input.identifier ?? '').trim();
      if (!SERVER_IDENTIFIER_PATTERN.test(identifier)) {
        throw new BadUserInputError(`identifier must be 1 to 32 characters of a-z, 0-9 and "_" (got "${input.identifier ?? ''}")`, 'identifier');
      }
      row.identifier = identifier;
    }
    if (creating || input.name !== undefined) {
      const name = (input.name ?? '').trim();
      if (name === '') throw new BadUserInputError('name is required', 'name');
      if (name.length > 255) throw new BadUserInputError('name must be at most 255 characters', 'name');
      row.name = name;
    }
    if (input.description !== undefined) {
      if ((input.description ?? '').length > 65535) throw new BadUserInputError('description must be at most 65535 characters', 'description');
      row.description = input.description;
    }
    if (creating || input.url !== undefined) {
      const url = (input.url ?? '').trim();
      if (url.length > 2048) throw new BadUserInputError('url must be at most 2048 characters', 'url');
      const check = checkOutboundUrl(url, this.options.allowedHosts);
      if (!check.ok) throw new BadUserInputError(`url ${check.reason}`, 'url');
      row.url = url;
    }
    if (input.authPlacement !== undefined && input.authPlacement !== null) {
      const placement = input.authPlacement.trim().toLowerCase();
      if (placement !== 'bearer' && placement !== 'header') throw new BadUserInputError('authPlacement must be "bearer" or "header"', 'authPlacement');
      row.authPlacement = placement;
    }
    if (input.authHeaderName !== undefined) {
      const header = (input.authHeaderName ?? '').trim();
      if (header !== '' && (!/^[A-Za-z0-9-]{1,190}$/.test(header) || RESERVED_HEADERS.has(header.toLowerCase()))) {
        throw new BadUserInputError('authHeaderName must be a header name (letters, digits, "-") other than one the transport sets', 'authHeaderName');
      }
      row.authHeaderName = header;
    }
    if (row.authPlacement === 'header' && row.authHeaderName === '') {
      throw new BadUserInputError('authPlacement "header" needs authHeaderName', 'authHeaderName');
    }
    if (input.dataClass !== undefined) {
      const dataClass = (input.dataClass ?? '').trim();
      if (dataClass.length > 32) throw new BadUserInputError('dataClass must be at most 32 characters', 'dataClass');
      row.dataClass = dataClass;
    }
    if (input.requiresApproval !== undefined && input.requiresApproval !== null) row.requiresApproval = input.requiresApproval;
    if (input.enabled !== undefined && input.enabled !== null) row.enabled = input.enabled;

    if (input.credential === undefined) return undefined;
    const credential = (input.credential ?? '').trim();
    if (credential === '') {
      row.authCredential = '';
      return null;
    }
    if (credential.length > 4096) throw new BadUserInputError('credential must be at most 4096 characters', 'credential');
    if (/[\r\n\0]/.test(credential)) throw new BadUserInputError('credential must be one line', 'credential');
    if (isEnvReference(credential)) {
      checkEnvReference(credential, this.options.environment, 'credential');
      // auth_credential is TYPO3's varchar(64).
      if (credential.length > 64) throw new BadUserInputError('credential "env:NAME" must be at most 64 characters', 'credential');
      row.authCredential = credential;
      return null;
    }
    row.authCredential = STORED_MARKER;
    return credential;
  }
}

function findCause<T extends Error>(error: unknown, type: new (...args: never[]) => T): T | null {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth += 1) {
    if (current instanceof type) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return null;
}
