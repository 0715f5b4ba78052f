import { Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { UnsignedIntColumn, VarcharColumn } from '../db/columns';

/** `promptwire_api_token`: the service's own table; tokens are stored only as sha256 hashes. */
@Entity({ name: 'promptwire_api_token' })
@Index('promptwire_api_token_token_hash', ['tokenHash'], { unique: true })
export class ApiTokenEntity {
  @PrimaryGeneratedColumn({ name: 'uid', type: 'int', unsigned: true })
  uid!: number;

  @VarcharColumn('name', 255)
  name!: string;

  @VarcharColumn('role', 16)
  role!: string;

  /** The TYPO3 backend user (be_users.uid) the token acts as; 0 = none. Written on runs, conversations and usage. */
  @UnsignedIntColumn('be_user')
  beUser!: number;

  /** The integration the token belongs to; the default `source_extension` of its usage rows. */
  @VarcharColumn('source', 64)
  source!: string;

  @VarcharColumn('token_hash', 64)
  tokenHash!: string;

  /** The first characters of the token, so an administrator can tell tokens apart. */
  @VarcharColumn('token_prefix', 16)
  tokenPrefix!: string;

  /** Unix seconds; 0 = active. */
  @UnsignedIntColumn('revoked_at')
  revokedAt!: number;

  @UnsignedIntColumn('last_used_at')
  lastUsedAt!: number;

  @UnsignedIntColumn('crdate')
  crdate!: number;
}
