import { CalculatorError, createCalculatorTool, evaluateArithmetic, formatNumber } from './calculator';

const calculate = (expression: string): string => formatNumber(evaluateArithmetic(expression));

describe('calculator', () => {
  it.each([
    ['2+3*4', '14'],
    ['(2+3)*4', '20'],
    ['10 - 4 - 3', '3'],
    ['2 * 3 / 4', '1.5'],
    ['7/2', '3.5'],
    ['10 % 4', '2'],
    ['-7 % 3', '-1'],
    ['-3 + 5', '2'],
    ['2*-3', '-6'],
    ['-(2 + 1)', '-3'],
    ['--4', '4'],
    ['+5', '5'],
    ['.5 * 2', '1'],
    ['3. + 1', '4'],
    ['12.25', '12.25'],
    ['0.1 + 0.2', '0.3'],
    ['1/3', '0.333333333333333'],
    [' ( 1 +\t2 )\n* 3 ', '9'],
    ['-0', '0'],
    ['123456789 * 1000', '123456789000'],
  ])('%s = %s', (expression, expected) => {
    expect(calculate(expression)).toBe(expected);
  });

  it.each([
    ['1/0', 'division by zero'],
    ['5 % 0', 'remainder by zero'],
    ['1/(2-2)', 'division by zero'],
  ])('refuses %s (%s)', (expression, message) => {
    expect(() => evaluateArithmetic(expression)).toThrow(new CalculatorError(message));
  });

  it.each(['', '   ', '2+', '(1', '1)', 'abc', '2**3', '2^3', '1e3', '1,5', 'Math.PI', 'process.exit()', '()', '.', '1 2', '=1'])(
    'refuses the garbage %j',
    (expression) => {
      expect(() => evaluateArithmetic(expression)).toThrow(CalculatorError);
    },
  );

  it('refuses a result that is not a finite number', () => {
    const huge = '9'.repeat(400);
    expect(() => evaluateArithmetic(huge)).toThrow(CalculatorError);
    expect(() => evaluateArithmetic('1' + '0'.repeat(300) + ' * 1' + '0'.repeat(300))).toThrow(
      'the result is not a finite number',
    );
  });

  it('refuses absurd nesting and length instead of overflowing the stack', () => {
    expect(() => evaluateArithmetic('('.repeat(500) + '1' + ')'.repeat(500))).toThrow('nesting deeper than 100 levels');
    expect(() => evaluateArithmetic('-'.repeat(1000) + '1')).toThrow(CalculatorError);
    expect(() => evaluateArithmetic('1+'.repeat(1500) + '1')).toThrow('longer than 2000 characters');
  });

  it('says where the unexpected character is', () => {
    expect(() => evaluateArithmetic('2 + x')).toThrow('unexpected "x" at position 5');
  });

  it('answers the number as text and rejects (does not throw synchronously) on bad input', async () => {
    const tool = createCalculatorTool();
    const signal = new AbortController().signal;
    await expect(tool.execute({ expression: '(12.5 + 7) * 2' }, { signal })).resolves.toBe('39');
    await expect(tool.execute({ expression: '1/0' }, { signal })).rejects.toThrow(CalculatorError);
  });

  it('is enabled by default and requires an expression string', () => {
    const tool = createCalculatorTool();
    expect(tool.name).toBe('calculator');
    expect(tool.enabledByDefault).toBe(true);
    expect(tool.parameters).toMatchObject({ required: ['expression'], properties: { expression: { type: 'string' } } });
  });
});
