import { describe, expect, it } from 'vitest';
import {
  formatAge,
  formatCount,
  formatTable,
  jsonForTerminal,
  paintFor,
  printable,
  printableLines,
  ProgressBar,
  renderProgressLine,
  visibleWidth,
  type OutputStream,
} from './terminal-output.js';

function recordingStream(isTTY: boolean): OutputStream & { written: string[] } {
  const written: string[] = [];
  return { isTTY, written, write: (text: string) => written.push(text) };
}

describe('formatTable', () => {
  it('pads every column to its widest cell, numbers on the right, no trailing spaces', () => {
    const lines = formatTable(
      [{ heading: 'group' }, { heading: 'ready', align: 'right' }, { heading: 'note' }],
      [
        ['emails', '12,345', ''],
        ['sms', '7', 'slow'],
      ],
    );
    expect(lines).toEqual(['group    ready  note', 'emails  12,345', 'sms          7  slow']);
  });

  it('measures coloured and wide-character cells by what shows', () => {
    const paint = paintFor({ isTTY: true, write: () => undefined }, {});
    const lines = formatTable([{ heading: 'g' }, { heading: 'n', align: 'right' }], [[paint.red('ü'), '1'], ['ab', paint.green('22')]], paint);
    expect(lines.map(visibleWidth)).toEqual([6, 6, 6]);
    expect(lines[1]).toBe(`${paint.red('ü')}    1`);
  });

  it('prints only the heading for no rows', () => {
    expect(formatTable([{ heading: 'id' }, { heading: 'payload' }], [])).toEqual(['id  payload']);
  });
});

describe('paintFor', () => {
  it('colours a terminal only while NO_COLOR is unset', () => {
    expect(paintFor({ isTTY: true, write: () => undefined }, {}).red('x')).toBe('\u001b[31mx\u001b[39m');
    expect(paintFor({ isTTY: true, write: () => undefined }, { NO_COLOR: '' }).red('x')).toBe('x');
    expect(paintFor({ isTTY: false, write: () => undefined }, {}).bold('x')).toBe('x');
  });
});

describe('formatAge and formatCount', () => {
  it('says ages in the two largest units', () => {
    expect([null, 0, 59.9, 61, 3_599, 3_600, 7_380, 86_400 + 3_600 * 5].map(formatAge)).toEqual([
      '-',
      '0s',
      '59s',
      '1m 01s',
      '59m 59s',
      '1h 00m',
      '2h 03m',
      '1d 5h',
    ]);
  });

  it('groups thousands whatever the locale', () => {
    expect(formatCount(1234567)).toBe('1,234,567');
  });
});

describe('ProgressBar', () => {
  it('draws in place on a terminal and ends the line once', () => {
    const stream = recordingStream(true);
    const bar = new ProgressBar(stream, 'requeue');
    bar.update(1, 4);
    bar.update(4, 4);
    bar.finish();
    bar.finish();
    expect(stream.written).toEqual([`\r${renderProgressLine('requeue', 1, 4)}`, `\r${renderProgressLine('requeue', 4, 4)}`, '\n']);
  });

  it('draws nothing off a terminal', () => {
    const stream = recordingStream(false);
    const bar = new ProgressBar(stream, 'purge');
    bar.update(1, 2);
    bar.finish();
    expect(stream.written).toEqual([]);
  });

  it('fills the bar by the share done', () => {
    expect(renderProgressLine('x', 450, 1000)).toBe(`x [${'#'.repeat(14)}${'.'.repeat(16)}] 450/1,000  45%`);
    expect(renderProgressLine('x', 0, 0)).toBe(`x [${'#'.repeat(30)}] 0/0 100%`);
  });
});

describe('printable', () => {
  const hostile = 'a\u001b]0;owned\u0007b\u001b]52;c;cm0gLXJmIH4=\u0007c\u001b[2K\u001b[1Ad\u009b31me\u007ff\u0000\tg\nh';

  it('shows every C0 and C1 control character as its escape, and leaves other text alone', () => {
    expect(printable(hostile)).toBe(
      'a\\x1b]0;owned\\x07b\\x1b]52;c;cm0gLXJmIH4=\\x07c\\x1b[2K\\x1b[1Ad\\u009b31me\\x7ff\\x00\\tg\\nh',
    );
    expect(printable('émoji 🙂 and ü, no controls')).toBe('émoji 🙂 and ü, no controls');
    expect(printableLines('first\u001b[2K\nsecond')).toBe('first\\x1b[2K\nsecond');
  });

  it('writes JSON a reader parses back to the same text, with no C1 control left raw', () => {
    const text = jsonForTerminal({ payload: hostile }, 2);
    // eslint-disable-next-line no-control-regex
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(JSON.parse(text)).toEqual({ payload: hostile });
  });
});
