/**
 * Account enumeration with a mail provider that takes MAILER_LATENCY_MS per
 * mail: no flow waits for a mail on one side only (the measurement:
 * ./enumeration.ts). Its own file so that it runs beside the
 * development-mailer suite instead of after it.
 */
import { describe } from 'vitest';
import { flows, logSummary, MAILER_LATENCY_MS } from './enumeration.js';

describe('account enumeration', () => {
  flows(`a mail provider taking ${MAILER_LATENCY_MS} ms`, { slowMailer: true });
  logSummary();
});
