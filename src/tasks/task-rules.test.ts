import { checkChoice, checkDeclaredVariables, placeholdersOf, readDeclaredVariables, renderTemplate, resolveVariables, TASK_CATEGORIES, taskVariablesOf, type DeclaredVariable } from './task-rules';

const resolved = (result: ReturnType<typeof resolveVariables>) => {
  if (!result.ok) throw new Error(result.message);
  return result.value;
};
const fault = (result: ReturnType<typeof resolveVariables>) => (result.ok ? null : result.message);

describe('task placeholders', () => {
  it('lists the placeholders in order of first appearance, input included, each once', () => {
    expect(placeholdersOf('Write for {{audience}} in {{tone}}: {{input}} ({{audience}})')).toEqual(['audience', 'tone', 'input']);
  });

  it('reads only {{name}} spelt without spaces, as nr_llm replaces {{input}} exactly', () => {
    expect(placeholdersOf('{{ input }} {{input-x}} {{1x}} {{_ok}}')).toEqual(['_ok']);
  });
});

describe('resolving and rendering variables', () => {
  const template = 'Write for {{audience}}: {{input}}';

  it('names a missing variable', () => {
    expect(fault(resolveVariables(template, [], 'text', {}))).toBe('Missing variables: audience');
  });

  it('names an unknown variable', () => {
    expect(fault(resolveVariables(template, [], 'text', { audience: 'kids', tone: 'x' }))).toBe('Unknown variables: tone');
  });

  it('names every fault at once: missing, unknown, mistyped', () => {
    const declared: DeclaredVariable[] = [{ name: 'count', type: 'integer', default: null, description: null }];
    expect(fault(resolveVariables('{{audience}} {{count}} {{input}}', declared, null, { count: '3', tone: 1 }))).toBe(
      'Missing variables: audience, input; Unknown variables: tone; Mistyped variables: count (expected integer, got string)',
    );
  });

  it('uses a declared default when the variable is left out or null', () => {
    const declared: DeclaredVariable[] = [{ name: 'audience', type: 'string', default: 'editors', description: null }];
    expect(renderTemplate(template, resolved(resolveVariables(template, declared, 'x', {})))).toBe('Write for editors: x');
    expect(renderTemplate(template, resolved(resolveVariables(template, declared, 'x', { audience: null })))).toBe('Write for editors: x');
  });

  it('writes numbers and booleans as text', () => {
    const declared: DeclaredVariable[] = [
      { name: 'n', type: 'number', default: null, description: null },
      { name: 'b', type: 'boolean', default: null, description: null },
    ];
    expect(renderTemplate('{{n}}/{{b}}', resolved(resolveVariables('{{n}}/{{b}}', declared, null, { n: 2.5, b: false })))).toBe('2.5/false');
  });

  it('inserts a value verbatim and never expands it again', () => {
    const values = resolved(resolveVariables(template, [], 'literal {{audience}} and {{input}}', { audience: '{{input}}' }));
    expect(renderTemplate(template, values)).toBe('Write for {{input}}: literal {{audience}} and {{input}}');
  });

  it('replaces every {{input}} as nr_llm\'s str_replace does', () => {
    expect(renderTemplate('{{input}} + {{input}}', resolved(resolveVariables('{{input}} + {{input}}', [], 'a', {})))).toBe('a + a');
  });

  it('takes variables.input as the input, and refuses it given twice', () => {
    expect(renderTemplate('{{input}}', resolved(resolveVariables('{{input}}', [], null, { input: 'v' })))).toBe('v');
    expect(fault(resolveVariables('{{input}}', [], 'a', { input: 'b' }))).toBe('input is given twice: as input and in variables');
  });

  it('accepts an input for a template without {{input}}', () => {
    expect(resolveVariables('no placeholder', [], 'ignored', {}).ok).toBe(true);
  });
});

describe('declared variables', () => {
  it('refuses declarations the template does not use, duplicates, input, bad types and defaults', () => {
    const check = (declared: Partial<DeclaredVariable>[]) => {
      const result = checkDeclaredVariables(declared as DeclaredVariable[], '{{a}} {{input}}');
      return result.ok ? 'ok' : result.message;
    };
    expect(check([{ name: 'a', type: 'string', default: null }])).toBe('ok');
    expect(check([{ name: 'b', type: 'string', default: null }])).toBe('variable "b" is declared but the template has no {{b}}');
    expect(check([{ name: 'a', type: 'string' }, { name: 'a', type: 'string' }])).toBe('variable "a" is declared twice');
    expect(check([{ name: 'input', type: 'string' }])).toBe("input is the task's input and cannot be declared as a variable");
    expect(check([{ name: 'a', type: 'date' as never }])).toBe('variable "a" has type "date"; the types are string, number, integer, boolean');
    expect(check([{ name: 'a', type: 'integer', default: 1.5 }])).toBe('the default of variable "a" must be a integer (got number)');
    expect(check([{ name: 'a b', type: 'string' }])).toMatch(/must start with a letter/);
  });

  it('reads stored declarations leniently, leaving out what is malformed', () => {
    expect(readDeclaredVariables('not json')).toEqual([]);
    expect(readDeclaredVariables('{"a":1}')).toEqual([]);
    expect(readDeclaredVariables('[{"name":"a","type":"integer","default":"x"},{"name":"b"},null,{"name":"c","type":"boolean","default":true,"description":"d"}]')).toEqual([
      { name: 'a', type: 'integer', default: null, description: null },
      { name: 'c', type: 'boolean', default: true, description: 'd' },
    ]);
  });

  it('describes each placeholder: declared ones with their type and default, others as required strings', () => {
    expect(taskVariablesOf('{{input}} {{a}} {{b}}', [{ name: 'b', type: 'integer', default: 3, description: 'count' }])).toEqual([
      { name: 'input', type: 'string', required: true, default: null, description: null },
      { name: 'a', type: 'string', required: true, default: null, description: null },
      { name: 'b', type: 'integer', required: false, default: 3, description: 'count' },
    ]);
  });
});

describe('value lists', () => {
  it('names the allowed values of a list', () => {
    expect(checkChoice('news', TASK_CATEGORIES, 'category')).toEqual({ ok: false, message: 'category must be one of log_analysis, content, system, developer, general (got "news")' });
    expect(checkChoice('content', TASK_CATEGORIES, 'category')).toEqual({ ok: true, value: 'content' });
  });
});
