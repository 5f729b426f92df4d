import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { HTTP_CODE_METADATA, METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { RequestMethod } from '@nestjs/common';
import {
  ApiOperation,
  expressPath,
  HTTP_ROUTES,
  routePath,
  type HttpRoute,
  type HttpRouteName,
} from '@toolgate/contracts';
import { HTTP_STATUS_BY_CODE } from '../api/error-status';
import { ApprovalEventsController } from './approval-events.controller';
import { ApprovalLinkController } from './approval-link.controller';
import { ConsoleController } from './console.controller';
import { GatewayController } from './gateway.controller';
import { openApiDocument } from './openapi';
import { PolicyWhatIfController } from './policy-whatif.controller';
import { ROUTE_NAME } from './route.decorator';

/**
 * One route table drives the HTTP API: the controllers serve exactly its routes (method, path,
 * status), the OpenAPI document describes exactly them, every bus operation has its route, and the
 * CLI writes no URL of its own.
 */

const ROUTES = Object.entries(HTTP_ROUTES) as [HttpRouteName, HttpRoute][];
const CONTROLLERS = [
  ApprovalEventsController,
  ApprovalLinkController,
  GatewayController,
  PolicyWhatIfController,
  ConsoleController,
];

interface Served {
  method: string;
  path: string;
  route: HttpRouteName | undefined;
  status: number | undefined;
}

/** Every handler Nest would mount, read from the decorators' metadata. */
function servedRoutes(): Served[] {
  const served: Served[] = [];
  for (const controller of CONTROLLERS) {
    const prefix = String(Reflect.getMetadata(PATH_METADATA, controller) ?? '');
    for (const key of Object.getOwnPropertyNames(controller.prototype)) {
      const handler = (controller.prototype as unknown as Record<string, object>)[key]!;
      const own = Reflect.getMetadata(PATH_METADATA, handler) as string | undefined;
      if (own === undefined || key === 'constructor') continue;
      const method = String(RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as number]);
      const joined = `/${[prefix, own]
        .map((p) => p.replace(/^\/+|\/+$/g, ''))
        .filter(Boolean)
        .join('/')}`;
      served.push({
        method: method.toLowerCase(),
        path: joined,
        route: Reflect.getMetadata(ROUTE_NAME, handler),
        status: Reflect.getMetadata(HTTP_CODE_METADATA, handler),
      });
    }
  }
  return served;
}

type Operation = {
  operationId?: string;
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
  requestBody?: { content: Record<string, { schema?: unknown }> };
  parameters?: { name: string; in: string }[];
};
const doc = openApiDocument() as {
  servers?: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
};

describe('the route table and the controllers', () => {
  it('every route of the table is served by one handler, with its method, path and status', () => {
    const served = servedRoutes();
    for (const [name, route] of ROUTES) {
      const handlers = served.filter((s) => s.route === name);
      expect([name, handlers.length]).toEqual([name, 1]);
      expect(handlers[0]).toEqual({
        method: route.method,
        path: expressPath(name),
        route: name,
        status: route.status,
      });
    }
  });

  it('serves nothing under /v1 that the table does not list, but the document itself', () => {
    const extra = servedRoutes()
      .filter((s) => s.route === undefined && s.path.startsWith('/v1'))
      .map((s) => `${s.method} ${s.path}`);
    expect(extra).toEqual(['get /v1/openapi.json']);
  });

  it('carries every bus API operation on exactly one route', () => {
    const carried = ROUTES.flatMap(([, r]) => (r.operation ? [r.operation] : []));
    expect([...carried].sort()).toEqual(Object.values(ApiOperation).sort());
  });

  it('fills path parameters percent-encoded and refuses a missing one', () => {
    expect(routePath('getApproval', { key: 'a/b' })).toBe('/v1/approvals/a%2Fb');
    expect(() => routePath('getRun', {})).toThrow(/runId/);
  });
});

describe('the route table and the OpenAPI document', () => {
  it('describes exactly the routes of the table, each with its name as operationId', () => {
    const described = Object.entries(doc.paths).flatMap(([p, ops]) =>
      Object.entries(ops).map(([m, op]) => `${m} ${p} ${op.operationId}`),
    );
    expect(described.sort()).toEqual(ROUTES.map(([n, r]) => `${r.method} ${r.path} ${n}`).sort());
  });

  it('gives every success response a schema, and every error code the route answers its status', () => {
    for (const [name, route] of ROUTES) {
      const op = doc.paths[route.path]![route.method]!;
      const success = Object.entries(op.responses).filter(([s]) => s.startsWith('2'));
      expect([name, success.map(([s]) => s)]).toEqual([
        name,
        expect.arrayContaining([String(route.status)]),
      ]);
      for (const [, response] of success) {
        const media = Object.values(response.content ?? {});
        expect([name, media.length > 0 && media.every((m) => m.schema !== undefined)]).toEqual([
          name,
          true,
        ]);
      }
      const errorStatuses = Object.keys(op.responses).filter((s) => !s.startsWith('2'));
      const expected = [...new Set(route.errors.map((c) => String(HTTP_STATUS_BY_CODE[c])))];
      expect([name, errorStatuses.sort()]).toEqual([name, expected.sort()]);
      expect([name, op.requestBody?.content['application/json']?.schema !== undefined]).toEqual([
        name,
        route.body !== undefined,
      ]);
      const pathParams = [...route.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      expect([
        name,
        (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name),
      ]).toEqual([name, pathParams]);
    }
  });

  it('names a server, and types the policy document wherever one travels', () => {
    expect(doc.servers?.length).toBeGreaterThan(0);
    const policy = doc.components.schemas.PolicyDocument!;
    expect(Object.keys(policy.properties ?? {})).toEqual(
      expect.arrayContaining(['engine', 'profiles', 'remote', 'approvals', 'errorCap']),
    );
    const text = (op: Operation) => JSON.stringify(op);
    const ref = '#/components/schemas/PolicyDocument';
    expect(text(doc.paths['/v1/policy']!.put!)).toContain(ref);
    expect(text(doc.paths['/v1/policy']!.get!)).toContain(ref);
    expect(text(doc.paths['/v1/policy/whatif']!.post!)).toContain(ref);
  });
});

describe('the route table and the CLI', () => {
  const cliSources = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory()
        ? cliSources(path.join(dir, e.name))
        : e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts')
          ? [path.join(dir, e.name)]
          : [],
    );
  const cliDir = path.resolve(__dirname, '../../../../libs/cli/src');

  it('writes no URL of its own: every request names a route of the table', () => {
    const files = cliSources(cliDir);
    expect(files.length).toBeGreaterThan(5);
    const named = new Set<string>();
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      expect([path.relative(cliDir, file), /['"`]\/v1\//.test(text)]).toEqual([
        path.relative(cliDir, file),
        false,
      ]);
      for (const m of text.matchAll(/\.call(?:Lines)?<[^>]*>\(\s*'([A-Za-z]+)'/gs))
        named.add(m[1]!);
      for (const m of text.matchAll(/\.call(?:Lines)?\(\s*'([A-Za-z]+)'/g)) named.add(m[1]!);
    }
    expect(named.size).toBeGreaterThan(8);
    for (const name of named) expect(Object.keys(HTTP_ROUTES)).toContain(name);
  });
});
