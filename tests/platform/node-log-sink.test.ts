import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createBatchedStdioSink } from '../../src/platform/node-log-sink.js';
import { createLogger } from '../../src/shared/logger.js';

function capture() {
  const stream = new PassThrough();
  const writes: string[] = [];
  stream.on('data', (chunk: Buffer) => writes.push(chunk.toString()));
  return { stream, writes };
}

describe('batched stdio sink (Node entry)', () => {
  it('writes the lines of one turn in one write per stream, in order, warnings and errors to stderr', async () => {
    const out = capture();
    const err = capture();
    const logger = createLogger({ sink: createBatchedStdioSink({ out: out.stream, err: err.stream }) });
    logger.info('first', { n: 1 });
    logger.warn('careful');
    logger.info('second', { password: 'hunter2' });
    logger.error('broken');
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));

    expect(out.writes).toHaveLength(1);
    expect(err.writes).toHaveLength(1);
    const outLines = out.writes[0]!.trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(outLines.map((line) => line.event)).toEqual(['first', 'second']);
    expect(outLines[1]!.password).toBe('[redacted]');
    expect(
      err.writes[0]!.trimEnd()
        .split('\n')
        .map((line) => (JSON.parse(line) as { event: string }).event),
    ).toEqual(['careful', 'broken']);
  });

  it('flush() writes what is pending at once (the exit hook calls it)', () => {
    const out = capture();
    const err = capture();
    const sink = createBatchedStdioSink({ out: out.stream, err: err.stream });
    sink('{"event":"pending"}', 'info');
    expect(out.writes).toEqual([]);
    sink.flush();
    // PassThrough emits 'data' synchronously on write while flowing.
    expect(out.writes.join('')).toBe('{"event":"pending"}\n');
  });
});
