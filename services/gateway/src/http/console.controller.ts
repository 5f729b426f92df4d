import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Controller, Get, Param, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import {
  ErrorCode,
  ToolgateError,
  inputPreviewModule,
  traceLinkModule,
  visibleTextModule,
} from '@toolgate/contracts';

/**
 * The approvals console's files: plain HTML, CSS and ES modules in `services/gateway/console`
 * (beside `src/` and `dist/`, so the sources and the build serve the same directory), read once.
 */
const CONSOLE_DIR = path.resolve(__dirname, '..', '..', 'console');

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * What the console's pages may do, and nothing more: its own scripts, styles and API (no inline
 * script or style, no other origin, no plugins, no framing, no forms posted anywhere), and Trusted
 * Types with no policy at all, so a string can never reach an HTML sink (`innerHTML`,
 * `document.write`, ...): the browser throws instead. Tool input is attacker-controlled; the
 * console only ever sets it as text, and this makes any slip an error rather than a script.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

interface ConsoleFile {
  type: string;
  body: Buffer;
}

/**
 * The files of the console directory this gateway serves (names only, nothing below it), and the
 * modules generated from the contracts' code so that the console cannot drift from it:
 * `visible-text.js` (the CLI's rules for revealing hidden characters), `input-preview.js` (the
 * listing's input preview) and `trace-link.js` (the CLI's trace UI links).
 */
function loadConsoleFiles(dir: string): ReadonlyMap<string, ConsoleFile> {
  const js = (source: string): ConsoleFile => ({
    type: CONTENT_TYPES['.js']!,
    body: Buffer.from(source),
  });
  const files = new Map<string, ConsoleFile>([
    ['visible-text.js', js(visibleTextModule())],
    ['input-preview.js', js(inputPreviewModule())],
    ['trace-link.js', js(traceLinkModule())],
  ]);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const type = CONTENT_TYPES[path.extname(entry.name)];
    if (!entry.isFile() || type === undefined || files.has(entry.name)) continue;
    files.set(entry.name, { type, body: readFileSync(path.join(dir, entry.name)) });
  }
  return files;
}

/**
 * Serves the approvals console at `/console/`: a page that signs in with a bearer token and talks
 * to this gateway's API (`/v1/...`) like any other client. No build step and no separate server:
 * the files are served as they are, with a strict Content-Security-Policy.
 */
@Controller('console')
export class ConsoleController {
  private readonly files = loadConsoleFiles(CONSOLE_DIR);

  /**
   * The page, at `/console/`. `/console` (which express routes here too) is redirected there, so
   * the page's relative URLs resolve under it, and its API calls go to `../v1/...`.
   */
  @Get()
  index(@Req() req: Request, @Res() res: Response): void {
    if (!req.path.endsWith('/')) {
      res.redirect(301, `${path.posix.basename(req.path)}/`);
      return;
    }
    this.send(res, 'index.html');
  }

  @Get(':file')
  file(@Param('file') file: string, @Res() res: Response): void {
    this.send(res, file);
  }

  private send(res: Response, name: string): void {
    // Only the names read at start-up: no path from the request ever reaches the file system.
    const file = this.files.get(name);
    if (!file) throw new ToolgateError(ErrorCode.NotFound, 'no such console file');
    res.status(200);
    res.setHeader('Content-Type', file.type);
    res.setHeader('Content-Security-Policy', CONSOLE_CSP);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
    res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
    res.setHeader('Cache-Control', 'no-cache');
    res.end(file.body);
  }
}
