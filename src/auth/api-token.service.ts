import crypto from 'node:crypto';
import type { DataSource, Repository } from 'typeorm';
import type { Logger } from '../logger';
import { NotFoundError, BadUserInputError } from '../shared/errors';
import { unixNow } from '../shared/time';
import { ApiTokenEntity } from './api-token.entity';
import type { RevocationBus, RevocationListener } from './revocation-bus';
import { type Caller, parseRole, Role } from './roles';

const CACHE_TTL_MS = 5_000;

/** Who a token acts as: a TYPO3 backend user (0 = none) and the integration it belongs to ('' = none). */
export interface TokenIdentity {
  beUser: number;
  source: string;
}

export const NO_IDENTITY: TokenIdentity = { beUser: 0, source: '' };

/** nr_llm's `source_extension` is varchar(64). */
export const SOURCE_MAX_LENGTH = 64;
const MAX_BE_USER = 4_294_967_295;

/** A token's identity as a client sent it, checked: a be_users uid and a source of printable characters. */
export function checkTokenIdentity(beUser: number, source: string): TokenIdentity {
  if (!Number.isSafeInteger(beUser) || beUser < 0 || beUser > MAX_BE_USER) {
    throw new BadUserInputError(`beUser must be a TYPO3 backend user uid (an integer from 0 to ${MAX_BE_USER}; 0 = none)`, 'beUser');
  }
  const trimmed = source.trim();
  if ([...trimmed].length > SOURCE_MAX_LENGTH) throw new BadUserInputError(`source must be at most ${SOURCE_MAX_LENGTH} characters (it is stored as nr_llm's source_extension)`, 'source');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(trimmed)) throw new BadUserInputError('source must not contain control characters', 'source');
  return { beUser, source: trimmed };
}

export interface CreatedToken extends TokenIdentity {
  uid: number;
  name: string;
  role: Role;
  token: string;
}

export interface ApiTokenSummary extends TokenIdentity {
  uid: number;
  name: string;
  role: Role;
  prefix: string;
  createdAt: number;
  lastUsedAt: number;
}

export function hashToken(token: string): string {
  return crypto.createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * API tokens: random, shown once, stored only as sha256 hashes (they carry 256
 * bits of entropy, so a slow hash adds nothing). Lookups are cached briefly so
 * that authentication does not cost a query on every request; a revocation
 * empties the cache of every instance at once (RevocationBus), and the
 * listeners of `onRevoked` (open WebSockets) act on it.
 */
export class ApiTokenService {
  private readonly repository: Repository<ApiTokenEntity>;
  private readonly cache = new Map<string, { caller: Caller | null; expires: number }>();

  constructor(
    dataSource: DataSource,
    private readonly logger: Logger,
    private readonly revocations: RevocationBus,
  ) {
    this.repository = dataSource.getRepository(ApiTokenEntity);
    // Revocations made here and on other instances alike.
    revocations.subscribe(() => this.cache.clear());
  }

  /** Called with the token's uid whenever a token is revoked, on any instance. */
  onRevoked(listener: RevocationListener): () => void {
    return this.revocations.subscribe(listener);
  }

  async authenticate(token: string): Promise<Caller | null> {
    const hash = hashToken(token);
    const cached = this.cache.get(hash);
    if (cached && cached.expires > Date.now()) return cached.caller;
    const row = await this.repository.findOne({ where: { tokenHash: hash, revokedAt: 0 } });
    const role = row ? parseRole(row.role) : null;
    const caller = row && role ? { tokenUid: row.uid, role, name: row.name, beUser: row.beUser, source: row.source } : null;
    this.cache.set(hash, { caller, expires: Date.now() + CACHE_TTL_MS });
    if (this.cache.size > 10_000) this.cache.clear();
    return caller;
  }

  async create(name: string, role: Role, identity: TokenIdentity = NO_IDENTITY): Promise<CreatedToken> {
    const trimmed = name.trim();
    if (trimmed === '' || trimmed.length > 255) throw new BadUserInputError('name must be 1 to 255 characters', 'name');
    const { beUser, source } = checkTokenIdentity(identity.beUser, identity.source);
    const token = `pw_${crypto.randomBytes(32).toString('base64url')}`;
    const row = await this.repository.save(
      this.repository.create({
        name: trimmed,
        role,
        tokenHash: hashToken(token),
        tokenPrefix: token.slice(0, 10),
        beUser,
        source,
        revokedAt: 0,
        lastUsedAt: 0,
        crdate: unixNow(),
      }),
    );
    this.logger.info({ tokenUid: row.uid, role, beUser, source }, 'api token created');
    return { uid: row.uid, name: row.name, role, token, beUser, source };
  }

  async list(): Promise<ApiTokenSummary[]> {
    const rows = await this.repository.find({ where: { revokedAt: 0 }, order: { uid: 'ASC' } });
    return rows.map((row) => ({
      uid: row.uid,
      name: row.name,
      role: parseRole(row.role) ?? Role.VIEWER,
      prefix: row.tokenPrefix,
      beUser: row.beUser,
      source: row.source,
      createdAt: row.crdate,
      lastUsedAt: row.lastUsedAt,
    }));
  }

  async revoke(uid: number): Promise<boolean> {
    const result = await this.repository.update({ uid, revokedAt: 0 }, { revokedAt: unixNow() });
    if (!result.affected) throw new NotFoundError(`No active API token with uid ${uid}`, 'uid');
    this.cache.clear();
    await this.revocations.publish(uid);
    this.logger.info({ tokenUid: uid }, 'api token revoked');
    return true;
  }

  /**
   * ADMIN_TOKEN registers (once) as an administrator token. Without it, an
   * empty token table gets a generated administrator token, returned so the
   * caller can print it once.
   */
  async bootstrap(adminToken: string | null): Promise<string | null> {
    if (adminToken) {
      const hash = hashToken(adminToken);
      const existing = await this.repository.findOne({ where: { tokenHash: hash } });
      if (!existing) {
        await this.repository.save(
          this.repository.create({ name: 'ADMIN_TOKEN', role: Role.ADMIN, tokenHash: hash, tokenPrefix: adminToken.slice(0, 6), beUser: 0, source: '', revokedAt: 0, lastUsedAt: 0, crdate: unixNow() }),
        );
      }
      return null;
    }
    const admins = await this.repository.count({ where: { role: Role.ADMIN, revokedAt: 0 } });
    if (admins > 0) return null;
    const created = await this.create('bootstrap administrator', Role.ADMIN);
    return created.token;
  }
}
