import crypto from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { IdentifierLock } from '../db/identifier-lock';
import { assertIdentifierAvailable, findLiveOrFail, normalizeIdentifier, optionalText, requireName, newRecordColumns } from '../db/record-rules';
import { checkTextFits, textLimitOf } from '../db/text-limits';
import { BadUserInputError } from '../shared/errors';
import { unixNow } from '../shared/time';
import { SkillEntity } from './skill.entity';

export interface SkillWrite {
  identifier?: string;
  name?: string;
  description?: string | null;
  body?: string;
  enabled?: boolean;
}

export function sha256Hex(text: string): string {
  return crypto.createHash('sha256').update(text, 'utf8').digest('hex');
}

export class SkillService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly identifiers: IdentifierLock,
  ) {}

  async list(): Promise<SkillEntity[]> {
    return this.dataSource.getRepository(SkillEntity).createQueryBuilder('s').where('s.deleted = 0').orderBy('s.name', 'ASC').addOrderBy('s.uid', 'ASC').getMany();
  }

  async findByIdentifier(identifier: string): Promise<SkillEntity | null> {
    return this.dataSource.getRepository(SkillEntity).findOne({ where: { identifier: identifier.trim().toLowerCase(), deleted: false }, order: { uid: 'ASC' } });
  }

  /**
   * Writing a body through the API is the review: the checksum is taken of
   * what was written. A body changed elsewhere without its checksum stays out
   * of runs (behaviour.md §6).
   */
  async create(input: SkillWrite): Promise<SkillEntity> {
    const identifier = normalizeIdentifier(input.identifier ?? '');
    return this.identifiers.transaction('tx_nrllm_skill', async (manager) => {
        await assertIdentifierAvailable(manager, SkillEntity, identifier, null, 'skill');
        const now = unixNow();
        const row = manager.create(SkillEntity, { ...newRecordColumns(now), description: null, enabled: false, orphaned: false });
        applyWrite(row, { ...input, identifier }, true);
        return manager.save(row);
      });
  }

  async update(uid: number, input: SkillWrite): Promise<SkillEntity> {
    const identifier = input.identifier === undefined ? undefined : normalizeIdentifier(input.identifier);
    return this.identifiers.transaction('tx_nrllm_skill', async (manager) => {
        const row = await findLiveOrFail(manager, SkillEntity, uid, 'skill');
        if (identifier !== undefined) await assertIdentifierAvailable(manager, SkillEntity, identifier, uid, 'skill');
        applyWrite(row, { ...input, identifier }, false);
        row.tstamp = unixNow();
        return manager.save(row);
      });
  }

  async delete(uid: number): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      await findLiveOrFail(manager, SkillEntity, uid, 'skill');
      await manager.update(SkillEntity, { uid }, { deleted: true, tstamp: unixNow() });
      return true;
    });
  }
}

function applyWrite(row: SkillEntity, input: SkillWrite, creating: boolean): void {
  const changes: Partial<SkillEntity> = {};
  if (input.identifier !== undefined) changes.identifier = input.identifier;
  if (creating || input.name !== undefined) changes.name = requireName(input.name ?? '');
  if (input.description !== undefined) changes.description = optionalText(input.description, textLimitOf(SkillEntity, 'description'), 'description') ?? null;
  if (creating || input.body !== undefined) {
    const body = input.body ?? '';
    if (body.trim() === '') throw new BadUserInputError('body is required', 'body');
    checkTextFits(body, textLimitOf(SkillEntity, 'body'), 'body');
    changes.body = body;
    changes.bodyChecksum = sha256Hex(body);
  }
  if (input.enabled !== undefined && input.enabled !== null) changes.enabled = input.enabled;
  Object.assign(row, changes);
}
