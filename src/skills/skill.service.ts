import crypto from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { assertIdentifierAvailable, findLiveOrFail, normalizeIdentifier, optionalText, requireName, newRecordColumns } from '../db/record-rules';
import type { PromptHistoryService } from '../prompt-history/prompt-history.service';
import { skillStateOf } from '../prompt-history/record-states';
import type { SkillState } from '../prompt-history/version-state';
import { BadUserInputError } from '../shared/errors';
import type { KeyedMutex } from '../shared/keyed-mutex';
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
    private readonly writeLock: KeyedMutex,
    private readonly history: PromptHistoryService,
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
  async create(input: SkillWrite, author: string | null = null): Promise<SkillEntity> {
    const identifier = normalizeIdentifier(input.identifier ?? '');
    const [saved, change] = await this.writeLock.run('tx_nrllm_skill', () =>
      this.dataSource.transaction(async (manager) => {
        await assertIdentifierAvailable(manager, SkillEntity, identifier, null, 'skill');
        const now = unixNow();
        const row = manager.create(SkillEntity, { ...newRecordColumns(now), description: null, enabled: false, orphaned: false });
        applyWrite(row, { ...input, identifier }, true);
        const created = await manager.save(row);
        return [created, await this.recordVersion(manager, created, null, author)] as const;
      }),
    );
    this.history.announce(change);
    return saved;
  }

  async update(uid: number, input: SkillWrite, author: string | null = null): Promise<SkillEntity> {
    const identifier = input.identifier === undefined ? undefined : normalizeIdentifier(input.identifier);
    return this.change(uid, author, async (manager, row) => {
      if (identifier !== undefined) await assertIdentifierAvailable(manager, SkillEntity, identifier, uid, 'skill');
      applyWrite(row, { ...input, identifier }, false);
    });
  }

  async delete(uid: number, author: string | null = null): Promise<boolean> {
    await this.change(uid, author, async (_manager, row) => {
      row.deleted = true;
    });
    return true;
  }

  private async change(uid: number, author: string | null, apply: (manager: EntityManager, row: SkillEntity) => Promise<void>): Promise<SkillEntity> {
    const [saved, change] = await this.writeLock.run('tx_nrllm_skill', () =>
      this.dataSource.transaction(async (manager) => {
        const row = await findLiveOrFail(manager, SkillEntity, uid, 'skill');
        const previous = skillStateOf(row);
        await apply(manager, row);
        row.tstamp = unixNow();
        const updated = await manager.save(row);
        return [updated, await this.recordVersion(manager, updated, previous, author)] as const;
      }),
    );
    this.history.announce(change);
    return saved;
  }

  private recordVersion(manager: EntityManager, row: SkillEntity, previous: SkillState | null, author: string | null) {
    return this.history.record(manager, { kind: 'skill', uid: row.uid, state: skillStateOf(row), previous, origin: { source: 'api', author } });
  }
}

function applyWrite(row: SkillEntity, input: SkillWrite, creating: boolean): void {
  const changes: Partial<SkillEntity> = {};
  if (input.identifier !== undefined) changes.identifier = input.identifier;
  if (creating || input.name !== undefined) changes.name = requireName(input.name ?? '');
  if (input.description !== undefined) changes.description = optionalText(input.description, 65535, 'description') ?? null;
  if (creating || input.body !== undefined) {
    const body = input.body ?? '';
    if (body.trim() === '') throw new BadUserInputError('body is required', 'body');
    if (Buffer.byteLength(body, 'utf8') > 16_000_000) throw new BadUserInputError('body is too large', 'body');
    changes.body = body;
    changes.bodyChecksum = sha256Hex(body);
  }
  if (input.enabled !== undefined && input.enabled !== null) changes.enabled = input.enabled;
  Object.assign(row, changes);
}
