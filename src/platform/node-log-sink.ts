import type { LogSink } from '../shared/logger.js';

/**
 * The Node entry's log sink: the lines of one turn of the event loop leave
 * in one write per stream instead of one write (a system call on a pipe or a
 * file) per line. Under load that is most of the access log's cost. Lines
 * keep their order per stream; whatever is pending when the process exits
 * (process.exit included) is written before it goes.
 */
export function createBatchedStdioSink(
  streams: { out: NodeJS.WritableStream; err: NodeJS.WritableStream } = { out: process.stdout, err: process.stderr },
): LogSink & { flush(): void } {
  let out = '';
  let err = '';
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (out) streams.out.write(out);
    if (err) streams.err.write(err);
    out = '';
    err = '';
  };
  process.once('exit', flush);
  const sink = (line: string, level: Parameters<LogSink>[1]) => {
    if (level === 'error' || level === 'warn') err += `${line}\n`;
    else out += `${line}\n`;
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  return Object.assign(sink, { flush });
}
