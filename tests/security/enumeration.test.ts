/**
 * Account enumeration with the development mailer (a log line, as in every
 * other suite): a registered and an unregistered email get the same answers,
 * in about the same time (the measurement: ./enumeration.ts).
 */
import { describe } from 'vitest';
import { flows, logSummary } from './enumeration.js';

describe('account enumeration', () => {
  flows('development mailer');
  logSummary();
});
