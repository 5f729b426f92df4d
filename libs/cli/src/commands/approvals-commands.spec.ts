import { inputPreview } from '@toolgate/contracts';
import { inputCell } from './approvals-commands';

const cellOf = (input: unknown) => inputCell({ inputPreview: inputPreview(input) });

describe('the approvals list INPUT cell', () => {
  it('shows the headline field, revealed and flagged when it hides characters', () => {
    expect(cellOf({ command: 'ls -la' })).toBe('ls -la');
    expect(cellOf({ command: 'echo ok # \u202E; rm -rf ~' })).toBe('! echo ok # \\u202E; rm -rf ~');
  });

  it('cuts a long headline to 48 characters, never inside a surrogate pair', () => {
    expect(cellOf({ command: 'x'.repeat(48) })).toBe('x'.repeat(48));
    expect(cellOf({ command: 'x'.repeat(60) })).toBe(`${'x'.repeat(47)}…`);
    // An emoji whose pair straddles the cut: dropped whole, not split into a lone half.
    const cell = cellOf({ command: `${'x'.repeat(46)}😀${'y'.repeat(10)}` });
    expect(cell).toBe(`${'x'.repeat(46)}…`);
    expect(cell).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
  });
});
