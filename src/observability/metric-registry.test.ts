import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { escapeHelp, escapeLabelValue, formatNumber, MetricRegistry } from './metric-registry.js';

describe('MetricRegistry exposition', () => {
  it('renders HELP, TYPE and one line per series of a counter and a gauge', () => {
    const registry = new MetricRegistry();
    const claims = registry.counter({ name: 'q_claims_total', help: 'Claims run.', labelNames: ['table', 'queue'] });
    const size = registry.gauge({ name: 'q_pool_size_connections', help: 'Pool size.' });
    claims.labels('jobs', 'emails').inc();
    claims.labels('jobs', 'emails').inc(2);
    claims.labels('jobs', 'sms').inc();
    size.labels().set(10);
    expect(registry.render()).toBe(
      [
        '# HELP q_claims_total Claims run.',
        '# TYPE q_claims_total counter',
        'q_claims_total{table="jobs",queue="emails"} 3',
        'q_claims_total{table="jobs",queue="sms"} 1',
        '# HELP q_pool_size_connections Pool size.',
        '# TYPE q_pool_size_connections gauge',
        'q_pool_size_connections 10',
        '',
      ].join('\n'),
    );
  });

  it('renders cumulative buckets, +Inf, _sum and _count of a histogram', () => {
    const registry = new MetricRegistry();
    const duration = registry.histogram({
      name: 'q_handler_duration_seconds',
      help: 'Handler time.',
      labelNames: ['queue'],
      buckets: [0.1, 1, 10],
    });
    const series = duration.labels('emails');
    for (const seconds of [0.05, 0.1, 0.5, 2, 20, Number.NaN]) series.observe(seconds);
    expect(registry.render()).toBe(
      [
        '# HELP q_handler_duration_seconds Handler time.',
        '# TYPE q_handler_duration_seconds histogram',
        'q_handler_duration_seconds_bucket{queue="emails",le="0.1"} 2',
        'q_handler_duration_seconds_bucket{queue="emails",le="1"} 3',
        'q_handler_duration_seconds_bucket{queue="emails",le="10"} 4',
        'q_handler_duration_seconds_bucket{queue="emails",le="+Inf"} 5',
        'q_handler_duration_seconds_sum{queue="emails"} 22.65',
        'q_handler_duration_seconds_count{queue="emails"} 5',
        '',
      ].join('\n'),
    );
  });

  it('renders a histogram without labels with le as its only label', () => {
    const registry = new MetricRegistry();
    registry.histogram({ name: 'h', help: 'h', buckets: [1] }).labels().observe(1);
    expect(registry.render()).toContain('h_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n');
  });

  it('escapes label values and HELP text as the format requires', () => {
    expect(escapeLabelValue('a\\b"c\nd')).toBe('a\\\\b\\"c\\nd');
    expect(escapeHelp('a\\b"c\nd')).toBe('a\\\\b"c\\nd');
    const registry = new MetricRegistry();
    registry.counter({ name: 'c_total', help: 'line one\nline "two"', labelNames: ['table'] }).labels('we"ird\\name\n').inc();
    expect(registry.render()).toBe(
      '# HELP c_total line one\\nline "two"\n# TYPE c_total counter\nc_total{table="we\\"ird\\\\name\\n"} 1\n',
    );
  });

  it('spells numbers as Prometheus reads them', () => {
    expect(formatNumber(Number.POSITIVE_INFINITY)).toBe('+Inf');
    expect(formatNumber(Number.NEGATIVE_INFINITY)).toBe('-Inf');
    expect(formatNumber(Number.NaN)).toBe('NaN');
    expect(formatNumber(0.005)).toBe('0.005');
    expect(formatNumber(1e-7)).toBe('1e-7');
    expect(formatNumber(42)).toBe('42');
  });

  it('runs collectors before rendering, so copied values are current', () => {
    const registry = new MetricRegistry();
    const held = registry.gauge({ name: 'held', help: 'held' }).labels();
    const copied = registry.counter({ name: 'copied_total', help: 'copied' }).labels();
    let now = 1;
    registry.addCollector(() => {
      held.set(now);
      copied.setTotal(now * 10);
    });
    expect(registry.render()).toContain('held 1\n');
    now = 3;
    expect(registry.render()).toContain('held 3\n');
    expect(registry.render()).toContain('copied_total 30\n');
  });

  it('keeps one series per label values and renders HELP and TYPE for a family without series', () => {
    const registry = new MetricRegistry();
    const family = registry.counter({ name: 'x_total', help: 'x', labelNames: ['a'] });
    expect(family.labels('1')).toBe(family.labels('1'));
    expect(new MetricRegistry().render()).toBe('');
    const empty = new MetricRegistry();
    empty.gauge({ name: 'g', help: 'g' });
    expect(empty.render()).toBe('# HELP g g\n# TYPE g gauge\n');
  });

  it('refuses bad names, label counts, buckets, a lowered counter and a second family of one name', () => {
    const registry = new MetricRegistry();
    expect(() => registry.counter({ name: '1bad', help: '' })).toThrow(DeclarationError);
    expect(() => registry.counter({ name: 'ok_total', help: '', labelNames: ['__reserved'] })).toThrow(DeclarationError);
    expect(() => registry.histogram({ name: 'h', help: '', buckets: [1, 1] })).toThrow(DeclarationError);
    expect(() => registry.histogram({ name: 'h', help: '', buckets: [1], labelNames: ['le'] })).toThrow(DeclarationError);
    const counter = registry.counter({ name: 'c_total', help: '', labelNames: ['a'] });
    expect(() => counter.labels()).toThrow(DeclarationError);
    expect(() => counter.labels('x').inc(-1)).toThrow(DeclarationError);
    expect(() => registry.gauge({ name: 'c_total', help: '' })).toThrow(DeclarationError);
  });
});
