import type { DataSource } from 'typeorm';
import { getEntities } from '../db/raw-rows';
import type { IdentifierLock } from '../db/identifier-lock';
import { assertIdentifierAvailable, findLiveOrFail, normalizeIdentifier, optionalText, requireName, liveRowsInListOrder, newRecordColumns } from '../db/record-rules';
import { checkTextFits, textLimitOf } from '../db/text-limits';
import { checkEnvReference, type CredentialEnvironment, isEnvReference, readEnvReference } from '../shared/env-reference';
import { BadUserInputError, ConflictError } from '../shared/errors';
import { SecretBox } from '../shared/secret-box';
import { unixNow } from '../shared/time';
import { readJsonObject } from '../prompt/snippet-metadata';
import { ADAPTER_TYPES, type AdapterType, type ProviderSettings } from './adapters/types';
import { ModelEntity } from './model.entity';
import { ProviderEntity } from './provider.entity';

export interface ProviderWrite {
  identifier?: string;
  name?: string;
  description?: string | null;
  adapterType?: string;
  endpointUrl?: string | null;
  /** Write-only. `null` or `""` clears the key; `env:NAME` reads NAME at call time. */
  apiKey?: string | null;
  organizationId?: string | null;
  apiTimeout?: number;
  maxRetries?: number;
  isActive?: boolean;
  priority?: number;
  sorting?: number;
}

export type KeyState = 'none' | 'stored' | 'environment' | 'external';

/** How a stored `api_key` value is to be read (behaviour.md §1). */
export function keyState(stored: string): KeyState {
  if (stored === '') return 'none';
  if (SecretBox.isEncrypted(stored)) return 'stored';
  if (isEnvReference(stored)) return 'environment';
  // TYPO3 keeps an identifier of its secret vault here, which this service cannot read.
  return 'external';
}

/** Where a provider's calls go: its adapter type and endpoint (empty = the type's default). */
function endpointOf(row: ProviderEntity): string {
  return `${row.adapterType} ${row.endpointUrl}`;
}

export class ProviderService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly identifiers: IdentifierLock,
    private readonly secrets: SecretBox,
    private readonly environment: CredentialEnvironment,
  ) {}

  async list(): Promise<ProviderEntity[]> {
    return getEntities(this.dataSource, liveRowsInListOrder(this.dataSource, ProviderEntity, 'p'));
  }

  async findByUids(uids: readonly number[]): Promise<ProviderEntity[]> {
    if (uids.length === 0) return [];
    return getEntities(this.dataSource, this.dataSource.getRepository(ProviderEntity).createQueryBuilder('p').where('p.uid IN (:...uids) AND p.deleted = 0', { uids: [...uids] }));
  }

  async findByIdentifier(identifier: string): Promise<ProviderEntity | null> {
    return this.dataSource.getRepository(ProviderEntity).findOne({ where: { identifier: identifier.trim().toLowerCase(), deleted: false }, order: { uid: 'ASC' } });
  }

  async create(input: ProviderWrite): Promise<ProviderEntity> {
    const identifier = normalizeIdentifier(input.identifier ?? '');
    return this.identifiers.transaction('tx_nrllm_provider', async (manager) => {
        await assertIdentifierAvailable(manager, ProviderEntity, identifier, null, 'provider');
        const now = unixNow();
        const row = manager.create(ProviderEntity, {
          ...newRecordColumns(now),
          description: null,
          endpointUrl: '',
          apiKey: '',
          organizationId: '',
          apiTimeout: 120,
          maxRetries: 3,
          options: null,
          isActive: true,
          priority: 50,
          sorting: 0,
        });
        this.applyWrite(row, { ...input, identifier }, true);
        return manager.save(row);
      });
  }

  async update(uid: number, input: ProviderWrite): Promise<ProviderEntity> {
    const identifier = input.identifier === undefined ? undefined : normalizeIdentifier(input.identifier);
    return this.identifiers.transaction('tx_nrllm_provider', async (manager) => {
        const row = await findLiveOrFail(manager, ProviderEntity, uid, 'provider');
        if (identifier !== undefined) await assertIdentifierAvailable(manager, ProviderEntity, identifier, uid, 'provider');
        const keyedEndpoint = row.apiKey !== '' ? endpointOf(row) : null;
        this.applyWrite(row, { ...input, identifier }, false);
        // A key entered for one endpoint is not sent to another unless it is entered again.
        if (keyedEndpoint !== null && input.apiKey === undefined && endpointOf(row) !== keyedEndpoint) {
          throw new BadUserInputError('The API key was given for the old endpoint: to change endpointUrl or adapterType, give apiKey again (or null to remove it)', 'apiKey');
        }
        row.tstamp = unixNow();
        return manager.save(row);
      });
  }

  /** A provider that live models still use cannot be deleted: that would strand them. */
  async delete(uid: number): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      await findLiveOrFail(manager, ProviderEntity, uid, 'provider');
      const models = await manager.getRepository(ModelEntity).count({ where: { providerUid: uid, deleted: false } });
      if (models > 0) throw new ConflictError(`The provider is still used by ${models} model(s); delete or move them first`, 'uid');
      await manager.update(ProviderEntity, { uid }, { deleted: true, tstamp: unixNow() });
      return true;
    });
  }

  /** The decrypted key, or null when the provider has no key this service can use. */
  resolveApiKey(row: ProviderEntity): string | null {
    switch (keyState(row.apiKey)) {
      case 'none':
      case 'external':
        return null;
      case 'environment': {
        // A row written before the allow-list, or by TYPO3, gets no key rather than any variable.
        const read = readEnvReference(row.apiKey, this.environment);
        return read.ok ? read.value : null;
      }
      case 'stored':
        return this.secrets.decrypt(row.apiKey);
    }
  }

  settingsFor(row: ProviderEntity): ProviderSettings {
    return {
      identifier: row.identifier,
      adapterType: row.adapterType as AdapterType,
      endpointUrl: row.endpointUrl,
      apiKey: this.resolveApiKey(row),
      organizationId: row.organizationId,
      apiTimeout: row.apiTimeout > 0 ? row.apiTimeout : 120,
      maxRetries: Math.max(0, Math.min(10, row.maxRetries)),
      options: readJsonObject(row.options),
    };
  }

  private applyWrite(row: ProviderEntity, input: ProviderWrite, creating: boolean): void {
    const changes: Partial<ProviderEntity> = {};
    if (input.identifier !== undefined) changes.identifier = input.identifier;
    if (creating || input.name !== undefined) changes.name = requireName(input.name ?? '');
    if (input.description !== undefined) changes.description = optionalText(input.description, textLimitOf(ProviderEntity, 'description'), 'description') ?? null;
    if (creating || input.adapterType !== undefined) {
      const type = (input.adapterType ?? '').trim().toLowerCase();
      if (!(ADAPTER_TYPES as readonly string[]).includes(type)) {
        throw new BadUserInputError(`adapterType must be one of ${ADAPTER_TYPES.join(', ')} (got "${input.adapterType}")`, 'adapterType');
      }
      changes.adapterType = type;
    }
    if (input.endpointUrl !== undefined) {
      const url = (input.endpointUrl ?? '').trim();
      if (url !== '') {
        checkTextFits(url, textLimitOf(ProviderEntity, 'endpointUrl'), 'endpointUrl');
        let parsed: URL;
        try {
          parsed = new URL(url);
        } catch {
          throw new BadUserInputError(`endpointUrl is not a valid URL: "${url}"`, 'endpointUrl');
        }
        if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new BadUserInputError('endpointUrl must use http or https', 'endpointUrl');
        if (parsed.username || parsed.password) throw new BadUserInputError('endpointUrl must not carry credentials; use apiKey', 'endpointUrl');
      }
      changes.endpointUrl = url.replace(/\/+$/, '');
    }
    const adapterType = changes.adapterType ?? row.adapterType;
    if (adapterType === 'custom' && (changes.endpointUrl ?? row.endpointUrl) === '') {
      throw new BadUserInputError('A custom (OpenAI-compatible) provider needs an endpointUrl', 'endpointUrl');
    }
    if (input.apiKey !== undefined) {
      const key = (input.apiKey ?? '').trim();
      if (key.length > 300) throw new BadUserInputError('apiKey must be at most 300 characters', 'apiKey');
      if (isEnvReference(key)) checkEnvReference(key, this.environment, 'apiKey');
      changes.apiKey = key === '' ? '' : isEnvReference(key) ? key : this.secrets.encrypt(key);
    }
    if (input.organizationId !== undefined) changes.organizationId = optionalText(input.organizationId ?? '', textLimitOf(ProviderEntity, 'organizationId'), 'organizationId') ?? '';
    if (input.apiTimeout !== undefined && input.apiTimeout !== null) {
      if (!Number.isInteger(input.apiTimeout) || input.apiTimeout < 1 || input.apiTimeout > 3600) throw new BadUserInputError('apiTimeout must be 1 to 3600 seconds', 'apiTimeout');
      changes.apiTimeout = input.apiTimeout;
    }
    if (input.maxRetries !== undefined && input.maxRetries !== null) {
      if (!Number.isInteger(input.maxRetries) || input.maxRetries < 0 || input.maxRetries > 10) throw new BadUserInputError('maxRetries must be 0 to 10', 'maxRetries');
      changes.maxRetries = input.maxRetries;
    }
    if (input.isActive !== undefined && input.isActive !== null) changes.isActive = input.isActive;
    if (input.priority !== undefined && input.priority !== null) changes.priority = input.priority;
    if (input.sorting !== undefined && input.sorting !== null) {
      if (input.sorting < 0) throw new BadUserInputError('sorting must be 0 or more', 'sorting');
      changes.sorting = input.sorting;
    }
    Object.assign(row, changes);
  }
}
