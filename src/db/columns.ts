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

/*
 * Column types exactly as nr_llm's ext_tables.sql declares them, display
 * widths included (TYPO3's schema analyser compares the full column type on
 * MariaDB, where `int unsigned` would read back as `int(10) unsigned`).
 */

/** `int(11) DEFAULT n NOT NULL` (signed). */
export function Typo3IntColumn(name: string, defaultValue = 0): PropertyDecorator {
  return Column({ name, type: 'int', width: 11, default: defaultValue, transformer: integerTransformer });
}

/** `int(11) unsigned DEFAULT n NOT NULL`. */
export function Typo3UnsignedIntColumn(name: string, defaultValue = 0): PropertyDecorator {
  return Column({ name, type: 'int', width: 11, unsigned: true, default: defaultValue, transformer: integerTransformer });
}

/** `tinyint(1) DEFAULT n NOT NULL`: nr_llm's own switches (`is_active`, `enabled`, …). */
export function Typo3SwitchColumn(name: string, defaultValue: 0 | 1): PropertyDecorator {
  return Column({ name, type: 'tinyint', width: 1, default: defaultValue, transformer: flagTransformer });
}

/** `tinyint(4) unsigned DEFAULT 0 NOT NULL`: TYPO3's `deleted` and `hidden`. */
export function Typo3StandardFlagColumn(name: string): PropertyDecorator {
  return Column({ name, type: 'tinyint', width: 4, unsigned: true, default: 0, transformer: flagTransformer });
}

/** `smallint(5) unsigned DEFAULT 0 NOT NULL` read as a flag (`tx_nrllm_agentrun.truncated`). */
export function Typo3SmallFlagColumn(name: string): PropertyDecorator {
  return Column({ name, type: 'smallint', width: 5, unsigned: true, default: 0, transformer: flagTransformer });
}

/** `text` / `mediumtext` NULL: a column nr_llm keeps that the service only carries along. */
export function Typo3TextColumn(name: string): PropertyDecorator {
  return Column({ name, type: 'text', nullable: true });
}

/** `uid int(11) [unsigned] NOT NULL auto_increment`, the primary key. */
export function Typo3UidColumn(options: { unsigned: boolean }): PropertyDecorator {
  return Column({ name: 'uid', type: 'int', width: 11, unsigned: options.unsigned, primary: true, generated: 'increment' });
}
