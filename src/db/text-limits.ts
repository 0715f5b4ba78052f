/**
 * How much text a column holds, counted as the column counts it, so that a
 * write refused on MySQL is refused on SQLite too (SQLite would store
 * anything) and never reaches the database as an error:
 * - `varchar(N)` holds N characters (code points; an emoji is one);
 * - `text` holds 65,535 bytes and `mediumtext` 16,777,215 bytes of UTF-8
 *   (utf8mb4): 30,000 × "€" is 90,000 bytes.
 * The limits are read from the entity's column declarations: one place.
 */
import { getMetadataArgsStorage } from 'typeorm';
import { BadUserInputError } from '../shared/errors';
import { isMediumTextColumn } from './columns';

export type TextLimit = { unit: 'characters' | 'bytes'; max: number };

const TEXT_BYTES = 65_535;
const MEDIUMTEXT_BYTES = 16_777_215;

const cache = new Map<string, TextLimit>();

/** The limit of `entity.property` as its column declaration says. */
export function textLimitOf(entity: Function, property: string): TextLimit {
  const key = `${entity.name}.${property}`;
  const cached = cache.get(key);
  if (cached) return cached;
  const column = getMetadataArgsStorage().columns.find((args) => args.target === entity && args.propertyName === property);
  if (!column) throw new Error(`${key} is not a column`);
  const type = String(column.options.type ?? '');
  let limit: TextLimit;
  if (type === 'varchar') limit = { unit: 'characters', max: Number(column.options.length) };
  else if (isMediumTextColumn(entity.name, property)) limit = { unit: 'bytes', max: MEDIUMTEXT_BYTES };
  else if (type === 'text') limit = { unit: 'bytes', max: TEXT_BYTES };
  else throw new Error(`${key} is not a text column`);
  cache.set(key, limit);
  return limit;
}

/** The size of `text` in the limit's unit. */
export function textSize(text: string, unit: TextLimit['unit']): number {
  if (unit === 'bytes') return Buffer.byteLength(text, 'utf8');
  let characters = 0;
  for (const _ of text) characters++;
  return characters;
}

/** Refuses text the column cannot hold: BAD_USER_INPUT naming the field and the limit in the column's unit. */
export function checkTextFits(text: string, limit: TextLimit, field: string, what = field): void {
  const size = textSize(text, limit.unit);
  if (size > limit.max) {
    const unit = limit.unit === 'bytes' ? 'bytes of UTF-8' : 'characters';
    throw new BadUserInputError(`${what} must be at most ${limit.max} ${unit} (got ${size})`, field);
  }
}
