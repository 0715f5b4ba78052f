import { registerEnumType } from 'type-graphql';

export enum Role {
  ADMIN = 'ADMIN',
  EDITOR = 'EDITOR',
  VIEWER = 'VIEWER',
}

registerEnumType(Role, { name: 'Role', description: 'ADMIN: everything. EDITOR: snippets, configurations, skills, runs. VIEWER: read and watch runs.' });

const rank: Record<Role, number> = { [Role.VIEWER]: 1, [Role.EDITOR]: 2, [Role.ADMIN]: 3 };

export function roleAtLeast(actual: Role, required: Role): boolean {
  return rank[actual] >= rank[required];
}

export function parseRole(value: string): Role | null {
  return (Object.values(Role) as string[]).includes(value) ? (value as Role) : null;
}

export interface Caller {
  tokenUid: number;
  role: Role;
  name: string;
  /** The TYPO3 backend user the token acts as; 0 = none. */
  beUser: number;
  /** The integration the token names ('' = none). */
  source: string;
}
