import type { DataSource, EntityManager } from 'typeorm';
import { getEntities } from '../db/raw-rows';
import type { IdentifierLock } from '../db/identifier-lock';
import { assertIdentifierAvailable, findLiveByIdentifierOrFail, findLiveOrFail, normalizeIdentifier, optionalText, requireName, liveRowsInListOrder, newRecordColumns } from '../db/record-rules';
import { checkTextFits, textLimitOf } from '../db/text-limits';
import { configurationsUsingModel } from '../configurations/configuration-usage';
import { BadUserInputError, ConflictError } from '../shared/errors';
import { unixNow } from '../shared/time';
import type { ModelPrices } from './cost';
import { ModelPriceEntity } from './model-price.entity';
import { ModelEntity } from './model.entity';
import { ProviderEntity } from './provider.entity';

export interface ModelWrite {
  identifier?: string;
  name?: string;
  description?: string | null;
  /** Provider identifier. */
  provider?: string;
  modelId?: string;
  contextLength?: number;
  maxOutputTokens?: number;
  capabilities?: string[];
  defaultTimeout?: number;
  costInput?: number;
  costOutput?: number;
  /** Extra prices (cents per million tokens), kept in `promptwire_model_price`; null clears. */
  costCacheRead?: number | null;
  costCacheWrite?: number | null;
  costReasoning?: number | null;
  isActive?: boolean;
  isDefault?: boolean;
  sorting?: number;
}

const EXTRA_PRICES = ['costCacheRead', 'costCacheWrite', 'costReasoning'] as const;

export class ModelService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly identifiers: IdentifierLock,
  ) {}

  async list(): Promise<ModelEntity[]> {
    return getEntities(this.dataSource, liveRowsInListOrder(this.dataSource, ModelEntity, 'm'));
  }

  async findByUids(uids: readonly number[]): Promise<ModelEntity[]> {
    if (uids.length === 0) return [];
    return getEntities(this.dataSource, this.dataSource.getRepository(ModelEntity).createQueryBuilder('m').where('m.uid IN (:...uids) AND m.deleted = 0', { uids: [...uids] }));
  }

  async pricesByModelUids(uids: readonly number[]): Promise<ModelPriceEntity[]> {
    if (uids.length === 0) return [];
    return this.dataSource.getRepository(ModelPriceEntity).createQueryBuilder('p').where('p.model_uid IN (:...uids)', { uids: [...uids] }).getMany();
  }

  async pricesFor(model: ModelEntity): Promise<ModelPrices> {
    const [extra] = await this.pricesByModelUids([model.uid]);
    return {
      costInput: model.costInput,
      costOutput: model.costOutput,
      costCacheRead: extra?.costCacheRead ?? null,
      costCacheWrite: extra?.costCacheWrite ?? null,
      costReasoning: extra?.costReasoning ?? null,
    };
  }

  async create(input: ModelWrite): Promise<ModelEntity> {
    const identifier = normalizeIdentifier(input.identifier ?? '');
    return this.identifiers.transaction('tx_nrllm_model', async (manager) => {
        await assertIdentifierAvailable(manager, ModelEntity, identifier, null, 'model');
        const now = unixNow();
        const row = manager.create(ModelEntity, {
          ...newRecordColumns(now),
          description: null,
          contextLength: 0,
          maxOutputTokens: 0,
          capabilities: 'chat',
          defaultTimeout: 120,
          costInput: 0,
          costOutput: 0,
          isActive: true,
          isDefault: false,
          sorting: 0,
        });
        await this.applyWrite(manager, row, { ...input, identifier }, true);
        const saved = await manager.save(row);
        await this.savePrices(manager, saved.uid, input);
        return saved;
      });
  }

  async update(uid: number, input: ModelWrite): Promise<ModelEntity> {
    const identifier = input.identifier === undefined ? undefined : normalizeIdentifier(input.identifier);
    return this.identifiers.transaction('tx_nrllm_model', async (manager) => {
        const row = await findLiveOrFail(manager, ModelEntity, uid, 'model');
        if (identifier !== undefined) await assertIdentifierAvailable(manager, ModelEntity, identifier, uid, 'model');
        await this.applyWrite(manager, row, { ...input, identifier }, false);
        row.tstamp = unixNow();
        const saved = await manager.save(row);
        await this.savePrices(manager, uid, input);
        return saved;
      });
  }

  async delete(uid: number): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      await findLiveOrFail(manager, ModelEntity, uid, 'model');
      const users = await configurationsUsingModel(manager, uid);
      if (users > 0) throw new ConflictError(`The model is still used by ${users} configuration(s); change them first`, 'uid');
      await manager.update(ModelEntity, { uid }, { deleted: true, tstamp: unixNow() });
      return true;
    });
  }

  private async savePrices(manager: EntityManager, modelUid: number, input: ModelWrite): Promise<void> {
    if (!EXTRA_PRICES.some((key) => input[key] !== undefined)) return;
    const repository = manager.getRepository(ModelPriceEntity);
    const existing = (await repository.findOne({ where: { modelUid } })) ?? repository.create({ modelUid, costCacheRead: null, costCacheWrite: null, costReasoning: null });
    for (const key of EXTRA_PRICES) {
      const value = input[key];
      if (value === undefined) continue;
      if (value !== null && (!Number.isInteger(value) || value < 0)) throw new BadUserInputError(`${key} must be a whole number of cents ≥ 0, or null`, key);
      existing[key] = value;
    }
    existing.tstamp = unixNow();
    await repository.save(existing);
  }

  private async applyWrite(manager: EntityManager, row: ModelEntity, input: ModelWrite, creating: boolean): Promise<void> {
    const changes: Partial<ModelEntity> = {};
    if (input.identifier !== undefined) changes.identifier = input.identifier;
    if (creating || input.name !== undefined) changes.name = requireName(input.name ?? '');
    if (input.description !== undefined) changes.description = optionalText(input.description, textLimitOf(ModelEntity, 'description'), 'description') ?? null;
    if (creating || input.modelId !== undefined) {
      const modelId = (input.modelId ?? '').trim();
      if (modelId === '') throw new BadUserInputError('modelId is required (the provider\'s model name)', 'modelId');
      checkTextFits(modelId, textLimitOf(ModelEntity, 'modelId'), 'modelId');
      changes.modelId = modelId;
    }
    const counts = [
      ['contextLength', input.contextLength],
      ['maxOutputTokens', input.maxOutputTokens],
      ['costInput', input.costInput],
      ['costOutput', input.costOutput],
    ] as const;
    for (const [key, value] of counts) {
      if (value === undefined || value === null) continue;
      if (!Number.isInteger(value) || value < 0 || value > 2147483647) throw new BadUserInputError(`${key} must be a whole number ≥ 0`, key);
      changes[key] = value;
    }
    if (input.defaultTimeout !== undefined && input.defaultTimeout !== null) {
      if (!Number.isInteger(input.defaultTimeout) || input.defaultTimeout < 1 || input.defaultTimeout > 3600) throw new BadUserInputError('defaultTimeout must be 1 to 3600 seconds', 'defaultTimeout');
      changes.defaultTimeout = input.defaultTimeout;
    }
    if (input.capabilities !== undefined && input.capabilities !== null) {
      const capabilities = input.capabilities.map((c) => c.trim().toLowerCase()).filter((c) => c !== '');
      if (capabilities.some((c) => c.includes(','))) throw new BadUserInputError('a capability may not contain a comma', 'capabilities');
      const csv = capabilities.join(',');
      checkTextFits(csv, textLimitOf(ModelEntity, 'capabilities'), 'capabilities', 'capabilities joined with commas');
      changes.capabilities = csv;
    }
    for (const key of EXTRA_PRICES) {
      const value = input[key];
      if (value !== undefined && value !== null && (!Number.isInteger(value) || value < 0)) throw new BadUserInputError(`${key} must be a whole number of cents ≥ 0, or null`, key);
    }
    if (input.isActive !== undefined && input.isActive !== null) changes.isActive = input.isActive;
    if (input.isDefault !== undefined && input.isDefault !== null) changes.isDefault = input.isDefault;
    if (input.sorting !== undefined && input.sorting !== null) {
      if (input.sorting < 0) throw new BadUserInputError('sorting must be 0 or more', 'sorting');
      changes.sorting = input.sorting;
    }
    if (creating || input.provider !== undefined) {
      const provider = await findLiveByIdentifierOrFail(manager, ProviderEntity, input.provider ?? '', 'provider', 'provider');
      changes.providerUid = provider.uid;
    }
    Object.assign(row, changes);
  }
}
