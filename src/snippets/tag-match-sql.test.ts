import Database from 'better-sqlite3';
import { mysqlTagPattern, registerSqliteTagFunction, SQLITE_HAS_TAG_FUNCTION, tagCondition } from './tag-match-sql';
import { hasTag } from '../prompt/tags';

/** Stored tag lists as TYPO3 (or a person with a SQL prompt) may leave them. */
const CSVS = [
  '',
  'style',
  ' Style ,tone',
  'tone,STYLE',
  'lifestyle,styles',
  'tone,,style',
  ',style,',
  '\tstyle\n',
  'sty le',
  'style\u00a0',
  'style\f',
  'style\u2028',
  '\0style\x0b',
  'x,tone of voice ,y',
  'Äpfel,äpfel',
  'ÄPFEL',
  'c++,a.b,[x],(y),a|b,$1,^z,100%,_u_,back\\slash',
  'persona,persona',
  '💡idea,emoji💡',
];

const TAGS = ['style', 'STYLE', ' style ', 'tone of voice', 'äpfel', 'Äpfel', 'c++', 'a.b', 'ab', '[x]', '(y)', 'a|b', '$1', '^z', '100%', '_u_', 'back\\slash', 'persona', '💡idea', 'emoji💡', 'sty', '', ' ', 'a,b'];

/** The MySQL pattern read by JavaScript: `\A`/`\z` are `^`/`$` there (without the m flag, `$` is the very end). */
function asJavaScript(pattern: string): RegExp {
  return new RegExp(pattern.replace('(\\A|,)', '(^|,)').replace('(,|\\z)', '(,|$)'), 'u');
}

describe('tag filters in SQL follow hasTag', () => {
  it.each(TAGS)('the MySQL pattern for %j matches exactly the tag lists hasTag finds it in', (tag) => {
    const pattern = mysqlTagPattern(tag);
    for (const csv of CSVS) {
      const matched = pattern === null ? false : asJavaScript(pattern).test(csv);
      expect([csv, matched]).toEqual([csv, hasTag(csv, tag)]);
    }
  });

  it('SQLite calls hasTag itself; odd column values read as text, NULL as no tags', () => {
    const database = new Database(':memory:');
    registerSqliteTagFunction(database);
    const has = (csv: unknown, tag: string) => (database.prepare(`SELECT ${SQLITE_HAS_TAG_FUNCTION}(?, ?) AS m`).get(csv, tag) as { m: number }).m;
    for (const csv of CSVS) for (const tag of TAGS) expect([csv, tag, has(csv, tag)]).toEqual([csv, tag, hasTag(csv, tag) ? 1 : 0]);
    expect(has(null, 'style')).toBe(0);
    expect(has(12, '12')).toBe(1);
    database.close();
  });

  it('ANY leaves out a tag that can match nothing; ALL then matches nothing; no tags, no condition', () => {
    expect(tagCondition('sqlite', 's.tags', [], 'ANY', 'tag')).toBeNull();
    expect(tagCondition('sqlite', 's.tags', ['', 'a,b'], 'ANY', 'tag')?.sql).toBe('1 = 0');
    expect(tagCondition('mysql', 's.tags', ['style', ''], 'ALL', 'tag')?.sql).toBe('1 = 0');
    const any = tagCondition('mariadb', 's.tags', ['style', ' '], 'ANY', 'tag');
    expect(any?.sql).toBe('(CONVERT(s.tags USING utf8mb4) COLLATE utf8mb4_bin REGEXP :tag_0)');
    expect(Object.keys(any?.parameters ?? {})).toEqual(['tag_0']);
    expect(tagCondition('sqlite', 's.tags', [' Style ', 'tone'], 'ALL', 'tag')).toEqual({
      sql: `(${SQLITE_HAS_TAG_FUNCTION}(s.tags, :tag_0) = 1 AND ${SQLITE_HAS_TAG_FUNCTION}(s.tags, :tag_1) = 1)`,
      parameters: { tag_0: 'style', tag_1: 'tone' },
    });
  });
});
