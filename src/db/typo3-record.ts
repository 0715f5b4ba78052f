import { Typo3IntColumn, Typo3StandardFlagColumn, Typo3UnsignedIntColumn, Typo3UidColumn } from './columns';

/**
 * The TYPO3 standard columns of nr_llm's editable tables, typed as its
 * ext_tables.sql types them: a signed `uid` and `pid`, unsigned unix-second
 * `tstamp`/`crdate`, `tinyint(4) unsigned` `deleted`/`hidden`.
 */
export abstract class Typo3Record {
  @Typo3UidColumn({ unsigned: false })
  uid!: number;

  @Typo3IntColumn('pid')
  pid!: number;

  @Typo3UnsignedIntColumn('tstamp')
  tstamp!: number;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;

  @Typo3StandardFlagColumn('deleted')
  deleted!: boolean;

  @Typo3StandardFlagColumn('hidden')
  hidden!: boolean;
}
