/**
 * Write rules shared by every editable TYPO3 table: identifiers, names,
 * uniqueness among non-deleted rows, soft delete.
 */
import type { DataSource, EntityManager, EntityTarget, ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { BadUserInputError, ConflictError, NotFoundError } from '../shared/errors';
import { checkTextFits, type TextLimit } from './text-limits';

const IDENTIFIER_PATTERN = /^[A-Za-z0-9_-]+$/;

/**
 * Identifiers are stored lower-case: `Nova_Persona` is accepted as
 * `nova_persona`. The pattern is checked before lower-casing, because
 * Unicode lower-casing turns some non-ASCII letters into ASCII ones (the
 * Kelvin sign `\u212A` into `k`), which would accept text the client never sent.
 */
export function normalizeIdentifier(raw: string | null | undefined, field = 'identifier'): string {
  const trimmed = (raw ?? '').trim();
  if (trimmed === '') throw new BadUserInputError(`${field} is required`, field);
  if (trimmed.length > 100) throw new BadUserInputError(`${field} must be at most 100 characters`, field);
  if (!IDENTIFIER_PATTERN.test(trimmed)) {
    throw new BadUserInputError(`${field} may only contain a-z, 0-9, "_" and "-" (got "${raw}")`, field);
  }
  return trimmed.toLowerCase();
}

/** Every editable table's `name` is a `varchar(255)`: 255 characters. */
const NAME_LIMIT: TextLimit = { unit: 'characters', max: 255 };

export function requireName(raw: string | null | undefined, field = 'name'): string {
  const name = (raw ?? '').trim();
  if (name === '') throw new BadUserInputError(`${field} is required`, field);
  checkTextFits(name, NAME_LIMIT, field);
  return name;
}

/** Text for a column, checked against what the column holds (`textLimitOf`). */
export function optionalText(raw: string | null | undefined, limit: TextLimit, field: string): string | undefined {
  if (raw === undefined || raw === null) return undefined;
  checkTextFits(raw, limit, field);
  return raw;
}

interface IdentifiedRow extends ObjectLiteral {
  uid: number;
  identifier: string;
  deleted: boolean;
}

export async function assertIdentifierAvailable<T extends IdentifiedRow>(
  manager: EntityManager,
  entity: EntityTarget<T>,
  identifier: string,
  exceptUid: number | null,
  what: string,
): Promise<void> {
  const rows = await manager
    .getRepository(entity)
    .createQueryBuilder('row')
    .select(['row.uid'])
    .where('row.identifier = :identifier AND row.deleted = 0', { identifier })
    .getMany();
  if (rows.some((row) => row.uid !== exceptUid)) {
    throw new ConflictError(`A ${what} with identifier "${identifier}" already exists`, 'identifier');
  }
}

export async function findLiveOrFail<T extends IdentifiedRow>(
  manager: EntityManager,
  entity: EntityTarget<T>,
  uid: number,
  what: string,
): Promise<T> {
  const row = await manager.getRepository(entity).createQueryBuilder('row').where('row.uid = :uid AND row.deleted = 0', { uid }).getOne();
  if (!row) throw new NotFoundError(`No ${what} with uid ${uid}`, 'uid');
  return row;
}

/** Resolves a relation given by identifier; an unknown one is NOT_FOUND naming the field. */
export async function findLiveByIdentifierOrFail<T extends IdentifiedRow>(
  manager: EntityManager,
  entity: EntityTarget<T>,
  identifier: string,
  what: string,
  field: string,
): Promise<T> {
  const normalized = identifier.trim().toLowerCase();
  if (normalized === '') throw new BadUserInputError(`${field} needs the identifier of a ${what}`, field);
  const row = await manager
    .getRepository(entity)
    .createQueryBuilder('row')
    .where('row.identifier = :identifier AND row.deleted = 0', { identifier: normalized })
    .orderBy('row.uid', 'ASC')
    .getOne();
  if (!row) throw new NotFoundError(`No ${what} with identifier "${identifier}"`, field);
  return row;
}

export interface Page {
  limit: number;
  offset: number;
}

export const MAX_PAGE_SIZE = 500;

export function checkPage(page: Page): Page {
  if (!Number.isInteger(page.limit) || page.limit < 0 || page.limit > MAX_PAGE_SIZE) {
    throw new BadUserInputError(`limit must be between 0 and ${MAX_PAGE_SIZE}`, 'limit');
  }
  if (!Number.isInteger(page.offset) || page.offset < 0) throw new BadUserInputError('offset must be 0 or more', 'offset');
  return page;
}

/** The standard columns of a new TYPO3 record (behaviour.md §1). */
export function newRecordColumns(now: number) {
  return { pid: 0, crdate: now, tstamp: now, deleted: false, hidden: false } as const;
}

/** Non-deleted rows in the list order every editable table uses: sorting, then name, then uid for stable pages. */
export function liveRowsInListOrder<T extends ObjectLiteral>(dataSource: DataSource, entity: EntityTarget<T>, alias: string): SelectQueryBuilder<T> {
  return dataSource
    .getRepository(entity)
    .createQueryBuilder(alias)
    .where(`${alias}.deleted = 0`)
    .orderBy(`${alias}.sorting`, 'ASC')
    .addOrderBy(`${alias}.name`, 'ASC')
    .addOrderBy(`${alias}.uid`, 'ASC');
}
