import { Entity, Index, PrimaryColumn } from 'typeorm';
import { UnsignedIntColumn } from '../db/columns';

/**
 * `promptwire_run_approval_deadline`: a run waiting for approval that was
 * given a timeout (`startRun(input: { approvalTimeoutSeconds })`), and when
 * its wait ends undecided. Written with the APPROVAL step that makes the run
 * wait, removed in the transaction that ends the wait (a decision, the
 * timeout, a cancel, an END), so whichever instance does housekeeping can
 * find what expired, after any restart. nr_llm has no such column; TYPO3's
 * table is not changed for it.
 */
@Entity({ name: 'promptwire_run_approval_deadline' })
@Index('promptwire_run_approval_deadline_at', ['deadlineAt'])
export class RunApprovalDeadlineEntity {
  @PrimaryColumn({ name: 'run_uid', type: 'int', unsigned: true })
  runUid!: number;

  /** Unix seconds. */
  @UnsignedIntColumn('deadline_at')
  deadlineAt!: number;
}
