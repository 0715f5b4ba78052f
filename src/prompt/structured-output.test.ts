import { checkStructuredAnswer, decodeJsonAnswer, isInStrictSubset, schemaText, withRepairInstruction, withSchemaInstruction } from './structured-output';

const schema = { type: 'object', properties: { title: { type: 'string', minLength: 1 }, tags: { type: 'array', items: { type: 'string' } } }, required: ['title'], additionalProperties: false };

describe('the strict schema subset', () => {
  it('accepts schemas made of the subset\'s keywords, annotations included', () => {
    expect(isInStrictSubset(schema)).toBe(true);
    expect(isInStrictSubset({ $schema: 'https://json-schema.org/draft/2020-12/schema', title: 'x', type: ['string', 'null'], pattern: '^a+$' })).toBe(true);
    expect(isInStrictSubset({ prefixItems: [{ type: 'string' }], oneOf: [{ const: 1 }, { enum: [2, 3] }] })).toBe(true);
  });

  it('refuses unknown keywords, bad values, references and annotation-only schemas', () => {
    expect(isInStrictSubset({ type: 'object', $ref: '#/x' })).toBe(false);
    expect(isInStrictSubset({ type: 'date' })).toBe(false);
    expect(isInStrictSubset({ description: 'only words' })).toBe(false);
    expect(isInStrictSubset({})).toBe(false);
    expect(isInStrictSubset([])).toBe(false);
    expect(isInStrictSubset({ multipleOf: 0.5 })).toBe(false);
    expect(isInStrictSubset({ pattern: '(' })).toBe(false);
    expect(isInStrictSubset({ properties: { a: { format: 'email' } } })).toBe(false);
    expect(isInStrictSubset({ enum: [] })).toBe(false);
  });
});

describe('structured answers', () => {
  const json = schemaText(schema);

  it('appends nr_llm\'s instruction and repair texts', () => {
    expect(withSchemaInstruction('P', '{}')).toBe('P\n\nRespond with ONLY a single JSON value conforming to this JSON Schema. Do not wrap it in Markdown code fences and do not add any prose:\n{}');
    expect(withRepairInstruction('P', '{}', 'bad')).toBe(
      'P\n\nRespond with ONLY a single JSON value conforming to this JSON Schema. Do not wrap it in Markdown code fences and do not add any prose:\n{}\n\nYour previous response did not conform to the schema. It was:\nbad',
    );
  });

  it('cuts the invalid answer to 2,000 characters (code points) and says so', () => {
    const long = '€'.repeat(2001);
    expect(withRepairInstruction('P', '{}', long).endsWith('€'.repeat(2000) + '\n[... truncated ...]')).toBe(true);
    expect(withRepairInstruction('P', '{}', '€'.repeat(2000)).endsWith('€'.repeat(2000))).toBe(true);
  });

  it('decodes an object or array, also inside one Markdown code fence, and nothing else', () => {
    expect(decodeJsonAnswer('{"a":1}')).toEqual({ a: 1 });
    expect(decodeJsonAnswer('```json\n{"a":1}\n```')).toEqual({ a: 1 });
    expect(decodeJsonAnswer('  ```\n[1]\n```  ')).toEqual([1]);
    expect(decodeJsonAnswer('"text"')).toBeUndefined();
    expect(decodeJsonAnswer('Here: {"a":1}')).toBeUndefined();
  });

  it('validates on the server with the reason of a failure', () => {
    expect(checkStructuredAnswer('{"title":"T"}', json)).toEqual({ valid: true, output: { title: 'T' } });
    const invalid = checkStructuredAnswer('{"title":""}', json);
    expect(invalid.valid).toBe(false);
    expect(invalid.valid === false && invalid.reason).toMatch(/title/);
    expect(checkStructuredAnswer('not json', json)).toEqual({ valid: false, reason: 'the answer is not a JSON object or array' });
  });
});
