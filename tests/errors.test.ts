import { HTTPException } from 'hono/http-exception';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { access, guard } from '../src/middleware/guard.js';
import { toApiError } from '../src/middleware/render-error.js';
import { ApiError, describeError, ERROR_STATUS, type ErrorCode } from '../src/shared/errors.js';
import { createTestApp, type TestApp } from './support/app.js';
import { UUID_V4 } from './support/http.js';

/** docs/api.md "Errors", transcribed: every code and its one status (with the codes its later sections add). */
// Oracle: copied from the contract on purpose; the service must agree with it.
const CONTRACT: Record<string, number> = {
  VALIDATION_ERROR: 400,
  UNAUTHORIZED: 401,
  INVALID_CREDENTIALS: 401,
  FORBIDDEN: 403,
  NO_ACTIVE_ORGANIZATION: 403,
  INSUFFICIENT_PERMISSIONS: 403,
  ACCOUNT_SCHEDULED_FOR_DELETION: 403,
  NOT_OWNER: 403,
  MFA_REQUIRED: 403,
  STEP_UP_REQUIRED: 403,
  SSO_REQUIRED: 403,
  NOT_FOUND: 404,
  SLUG_CONFLICT: 409,
  DOMAIN_TAKEN: 409,
  DOMAIN_NOT_VERIFIED: 409,
  OWNERSHIP_CONSTRAINT: 409,
  DEFAULT_ROLE: 409,
  TARGET_NOT_ADMIN: 409,
  QUOTA_EXCEEDED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
  // Ours, beyond the contract's table: a known path with a wrong method (HTTP's 405 with Allow).
  METHOD_NOT_ALLOWED: 405,
};

const open = guard(access.public());

/** Something a careless handler could leak: SQL, a password, a stack. */
const LEAKY_MESSAGE = 'insert into "user" values ($1) -- password=hunter2-leak';

describe('errors', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
    t.app.get('/api/test/boom', open, () => {
      throw new Error(LEAKY_MESSAGE);
    });
    t.app.get('/api/test/rejects', open, async () => {
      await Promise.resolve();
      throw new TypeError('async failure at /srv/app/src/secret-path.ts:12');
    });
    t.app.get('/api/test/api-error/:code', open, (c) => {
      const code = c.req.param('code') as ErrorCode;
      throw new ApiError(code, `message for ${code}`);
    });
    t.app.get('/api/test/details', open, () => {
      throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions', {
        details: [{ path: 'scopes.0', message: 'not held: roles:write' }],
      });
    });
    t.app.get('/api/test/headers', open, () => {
      throw new ApiError('RATE_LIMITED', 'Too many requests', { headers: { 'Retry-After': '42' } });
    });
    t.app.get('/api/test/http-exception/:status', open, (c) => {
      throw new HTTPException(Number(c.req.param('status')) as 400, { message: 'hono says no: internal detail' });
    });
    t.app.get('/api/test/unreachable', open, () => {
      throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { code: 'ECONNREFUSED' });
    });
  });
  afterAll(() => t.close());
  beforeEach(() => {
    t.logger.lines.length = 0;
  });

  const errorLines = () => t.logger.lines.filter((line) => line.level === 'error');

  describe('unknown route', () => {
    it('answers 404 { code: NOT_FOUND, message } as JSON', async () => {
      for (const [method, path] of [
        ['GET', '/api/definitely/not/here'],
        ['POST', '/api/nope'],
        ['GET', '/not-even-api'],
      ] as const) {
        const res = await t.app.request(path, { method });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.headers.get('content-type')).toMatch(/^application\/json/);
        expect(await res.json()).toEqual({ code: 'NOT_FOUND', message: expect.any(String) });
        expect(res.headers.get('x-request-id')).toMatch(UUID_V4);
      }
      expect(errorLines()).toEqual([]);
    });
  });

  describe('unexpected errors', () => {
    it('answer 500 with exactly { code: INTERNAL_ERROR, message: Internal server error }', async () => {
      const res = await t.app.request('/api/test/boom');
      expect(res.status).toBe(500);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const text = await res.text();
      expect(JSON.parse(text)).toStrictEqual({ code: 'INTERNAL_ERROR', message: 'Internal server error' });
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain('insert into');
      expect(text).not.toMatch(/\bat .*\.ts:\d+/);
    });

    it('carry X-Request-Id, and the error log line has the same requestId', async () => {
      const res = await t.app.request('/api/test/boom');
      const id = res.headers.get('x-request-id');
      expect(id).toMatch(UUID_V4);
      const lines = errorLines();
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        level: 'error',
        requestId: id,
        code: 'INTERNAL_ERROR',
        error: { name: 'Error' },
      });
      // The log keeps name and message for the operator, never a stack.
      expect(JSON.stringify(lines[0])).not.toMatch(/\n\s+at |\.ts:\d+:\d+/);
      // And the access line agrees.
      expect(t.logger.lines.find((line) => line.event === 'request')).toMatchObject({ requestId: id, status: 500 });
    });

    it('keep a client-chosen request id on the response and in the log', async () => {
      const res = await t.app.request('/api/test/boom', { headers: { 'X-Request-Id': 'client-trace-77' } });
      expect(res.status).toBe(500);
      expect(res.headers.get('x-request-id')).toBe('client-trace-77');
      expect(errorLines()[0]).toMatchObject({ requestId: 'client-trace-77' });
    });

    it('answer the same for an async rejection', async () => {
      const res = await t.app.request('/api/test/rejects');
      expect(res.status).toBe(500);
      const text = await res.text();
      expect(JSON.parse(text)).toStrictEqual({ code: 'INTERNAL_ERROR', message: 'Internal server error' });
      expect(text).not.toContain('secret-path');
      expect(errorLines()).toHaveLength(1);
    });

    it('answer 503 SERVICE_UNAVAILABLE when the database cannot be reached, without the address', async () => {
      const res = await t.app.request('/api/test/unreachable');
      expect(res.status).toBe(503);
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String) });
      expect(text).not.toContain('10.0.0.5');
      expect(errorLines()).toHaveLength(1);
    });
  });

  describe('ApiError', () => {
    it('renders details when given', async () => {
      const res = await t.app.request('/api/test/details');
      expect(res.status).toBe(403);
      expect(await res.json()).toStrictEqual({
        code: 'INSUFFICIENT_PERMISSIONS',
        message: 'Insufficient permissions',
        details: [{ path: 'scopes.0', message: 'not held: roles:write' }],
      });
    });

    it('omits details when not given', async () => {
      const res = await t.app.request('/api/test/api-error/SLUG_CONFLICT');
      expect(await res.json()).toStrictEqual({ code: 'SLUG_CONFLICT', message: 'message for SLUG_CONFLICT' });
    });

    it('sends the headers it carries', async () => {
      const res = await t.app.request('/api/test/headers');
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('42');
    });

    it('ERROR_STATUS is exactly the table of docs/api.md "Errors"', () => {
      expect({ ...ERROR_STATUS }).toEqual(CONTRACT);
    });

    it.each(Object.entries(CONTRACT))('%s answers %i in the contract shape', async (code, status) => {
      const res = await t.app.request(`/api/test/api-error/${code}`);
      expect(res.status).toBe(status);
      expect(await res.json()).toStrictEqual({ code, message: `message for ${code}` });
      expect(res.headers.get('x-request-id')).toMatch(UUID_V4);
      // Only 5xx are logged as errors.
      expect(errorLines()).toHaveLength(status >= 500 ? 1 : 0);
    });
  });

  describe("hono's own HTTPExceptions", () => {
    it.each([
      [400, 'VALIDATION_ERROR'],
      [401, 'UNAUTHORIZED'],
      [403, 'FORBIDDEN'],
      [404, 'NOT_FOUND'],
      [413, 'PAYLOAD_TOO_LARGE'],
      [415, 'UNSUPPORTED_MEDIA_TYPE'],
    ])('%i becomes %s without the original message', async (status, code) => {
      const res = await t.app.request(`/api/test/http-exception/${status}`);
      expect(res.status).toBe(status);
      const body = (await res.json()) as { code: string; message: string };
      expect(body).toEqual({ code, message: expect.any(String) });
      expect(body.message).not.toContain('internal detail');
    });
  });

  describe('helpers', () => {
    it('an ApiError knows no HTTP: a plain Error with a code, its status applied when rendered', () => {
      const error = new ApiError('NOT_FOUND', 'Member not found');
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(HTTPException);
      expect(error).not.toHaveProperty('status');
      expect(error.code).toBe('NOT_FOUND');
    });

    it('toApiError keeps the cause but not its message', () => {
      const cause = new Error('db password=abc');
      const mapped = toApiError(cause);
      expect(mapped.code).toBe('INTERNAL_ERROR');
      expect(mapped.cause).toBe(cause);
      expect(JSON.stringify(mapped.toBody())).not.toContain('abc');
    });

    it('describeError gives name, message and code, never the stack', () => {
      const error = Object.assign(new RangeError('bad'), { code: '23505' });
      expect(describeError(error)).toStrictEqual({ name: 'RangeError', message: 'bad', code: '23505' });
      expect(describeError(42)).toStrictEqual({ name: 'NonError', message: '42' });
    });
  });
});
