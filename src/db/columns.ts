/**
 * Column helpers for the TYPO3 table conventions. Rows may be written by TYPO3
 * or by hand, so every transformer reads odd values without failing.
 */
import { Column, type ColumnOptions, type ValueTransformer } from 'typeorm';

/** tinyint flags: any non-zero value reads as true; writes 1 or 0. */
export const flagTransformer: ValueTransformer = {
  to: (value: boolean | number | null | undefined) => (value === undefined ? undefined : value ? 1 : 0),
  from: (value: unknown) => {
    const number = Number(value);
    return Number.isFinite(number) && number !== 0;
  },
};

/** decimal columns come back as strings from mysql2; the API speaks numbers. */
export const decimalTransformer: ValueTransformer = {
  to: (value: number | null | undefined) => value,
  from: (value: unknown) => {
    if (value === null || value === undefined) return null;
    const number = Number(value);
    return Number.isFinite(number) ? number : 0;
  },
};

/** Integer columns may hold NULL or text in rows written by other programs. */
export const integerTransformer: ValueTransformer = {
  to: (value: number | undefined) => value,
  from: (value: unknown) => {
    const number = Number(value);
    return Number.isFinite(number) ? Math.trunc(number) : 0;
  },
};

/** Text columns may be NULL in TYPO3 rows even where the service always writes a string. */
export const textTransformer: ValueTransformer = {
  to: (value: string | null | undefined) => value,
  from: (value: unknown) => (value === null || value === undefined ? '' : String(value)),
};

const mediumTextColumns = new Set<string>();

/**
 * A TYPO3 `mediumtext` column. SQLite knows no such type, so the entity says
 * `text` and the MySQL data source widens these columns after building its
 * metadata (see `applyDialectColumnTypes`).
 */
export function MediumTextColumn(options: Omit<ColumnOptions, 'type'> = {}): PropertyDecorator {
  const column = Column({ ...options, type: 'text' });
  return (target, propertyKey) => {
    mediumTextColumns.add(`${target.constructor.name}.${String(propertyKey)}`);
    column(target, propertyKey);
  };
}

export function isMediumTextColumn(entityName: string, propertyName: string): boolean {
  return mediumTextColumns.has(`${entityName}.${propertyName}`);
}

export function FlagColumn(name: string, defaultValue: 0 | 1): PropertyDecorator {
  return Column({ name, type: 'tinyint', unsigned: true, default: defaultValue, transformer: flagTransformer });
}

export function UnsignedIntColumn(name: string, defaultValue = 0): PropertyDecorator {
  return Column({ name, type: 'int', unsigned: true, default: defaultValue, transformer: integerTransformer });
}

export function IntColumn(name: string, defaultValue = 0): PropertyDecorator {
  return Column({ name, type: 'int', default: defaultValue, transformer: integerTransformer });
}

export function DecimalColumn(name: string, precision: number, scale: number, defaultValue: string | null): PropertyDecorator {
  return Column({
    name,
    type: 'decimal',
    precision,
    scale,
    default: defaultValue ?? undefined,
    nullable: defaultValue === null,
    transformer: decimalTransformer,
  });
}

export function VarcharColumn(name: string, length: number, options: { nullable?: boolean; default?: string } = {}): PropertyDecorator {
  return Column({
    name,
    type: 'varchar',
    length,
    nullable: options.nullable ?? false,
    default: options.nullable ? undefined : (options.default ?? ''),
    transformer: options.nullable ? undefined : textTransformer,
  });
}
