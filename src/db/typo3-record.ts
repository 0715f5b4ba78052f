import { PrimaryGeneratedColumn } from 'typeorm';
import { FlagColumn, UnsignedIntColumn } from './columns';

/** The TYPO3 standard columns every editable `tx_nrllm_*` table carries (behaviour.md §1). */
export abstract class Typo3Record {
  @PrimaryGeneratedColumn({ name: 'uid', type: 'int', unsigned: true })
  uid!: number;

  @UnsignedIntColumn('pid')
  pid!: number;

  @UnsignedIntColumn('tstamp')
  tstamp!: number;

  @UnsignedIntColumn('crdate')
  crdate!: number;

  @FlagColumn('deleted', 0)
  deleted!: boolean;

  @FlagColumn('hidden', 0)
  hidden!: boolean;
}
